// Trivial TensorFlow kernels that measure TensorFlow's own floor for a custom op
// inside tf.function (benchmarks/studies/tf_kernel_floor.py builds and times them). Each
// copies its input to a new output of the same shape; they differ only in how the
// kernel finishes:
//
// - FloorSync: a plain OpKernel.
// - FloorAsyncInline: an AsyncOpKernel that calls `done` inside ComputeAsync.
// - FloorAsyncInlineWork: FloorAsyncInline that first either spins for `spin_ns`
//   (time on the kernel's thread, touching no memory) or reads and writes one byte in
//   each 64-byte line of the first `touch_kb` KiB of a private buffer (the same lines
//   every call, as a library's own state would be). Side by side they separate the
//   time a kernel takes from what its footprint in the caches costs TensorFlow's
//   own work around it.
// - FloorAsyncThread: an AsyncOpKernel that hands `done` to one long-lived worker
//   thread, which calls it, as lockstep's background thread does. The worker
//   either sleeps on a condition variable (woken per op) or spins; FloorSetSpin
//   switches it, so it burns a core only while the spinning variant runs.
//
// Built with -DFLOOR_WITH_MPI (and MPI's flags), two more add a real 4-byte
// float32 MPI_Allreduce (sum, on a duplicate of MPI_COMM_WORLD; MPI must already be
// initialized with MPI_THREAD_MULTIPLE, as mpi4py does), the least any library's
// collective could do:
//
// - FloorMpiSync: a plain OpKernel that calls MPI_Allreduce in Compute, blocking
//   TensorFlow's thread (what lockstep avoids: ranks that order independent
//   collectives differently could deadlock).
// - FloorMpiAsyncInline: an AsyncOpKernel that calls MPI_Allreduce and then `done`
//   inside ComputeAsync: the least an asynchronous kernel (what a collective must be,
//   for the reason above) pays for one collective, before any negotiation.
// - FloorMpiThread: an AsyncOpKernel whose worker thread (its own, condition
//   variable) calls MPI_Allreduce and then `done`.
//
// Not part of lockstep: nothing here links against it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#ifdef FLOOR_WITH_MPI
#include <mpi.h>
#endif

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

#define FLOOR_OP(NAME)                          \
  REGISTER_OP(NAME)                             \
      .Input("tensor: T")                       \
      .Output("output: T")                      \
      .Attr("T: {float, double, int32, int64}") \
      .SetIsStateful()                          \
      .SetShapeFn(tensorflow::shape_inference::UnchangedShape)

FLOOR_OP("FloorSync");
FLOOR_OP("FloorAsyncInline");
FLOOR_OP("FloorAsyncThread");

REGISTER_OP("FloorAsyncInlineWork")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: {float, double, int32, int64}")
    .Attr("spin_ns: int = 0")
    .Attr("touch_kb: int = 0")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("FloorSetSpin")
    .Input("spin: bool")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs);

// Copies input 0 to a freshly allocated output 0; false (status set) on failure.
bool CopyThrough(OpKernelContext* context) {
  const Tensor& input = context->input(0);
  Tensor* output = nullptr;
  absl::Status status = context->allocate_output(0, input.shape(), &output);
  if (!status.ok()) {
    context->SetStatus(status);
    return false;
  }
  std::memcpy(output->data(), input.data(), input.TotalBytes());
  return true;
}

class FloorSync : public OpKernel {
 public:
  explicit FloorSync(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override { CopyThrough(context); }
};

class FloorAsyncInline : public AsyncOpKernel {
 public:
  explicit FloorAsyncInline(OpKernelConstruction* context) : AsyncOpKernel(context) {}
  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    CopyThrough(context);
    done();
  }
};

class FloorAsyncInlineWork : public AsyncOpKernel {
 public:
  explicit FloorAsyncInlineWork(OpKernelConstruction* context) : AsyncOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("spin_ns", &spin_ns_));
    OP_REQUIRES_OK(context, context->GetAttr("touch_kb", &touch_kb_));
    lines_.assign(static_cast<size_t>(touch_kb_) * 1024, 1);
  }
  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    CopyThrough(context);
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns_);
    while (std::chrono::steady_clock::now() < until) {
    }
    for (size_t i = 0; i < lines_.size(); i += 64) lines_[i] = static_cast<char>(lines_[i] + 1);
    done();
  }

 private:
  int64_t spin_ns_ = 0;
  int64_t touch_kb_ = 0;
  std::vector<char> lines_;  // the benchmark calls one function at a time: no races
};

// One worker thread that runs the callbacks it is handed, in order. It lives for
// the whole process (leaked on purpose: no shutdown ordering against TensorFlow).
class Worker {
 public:
  static Worker& Get() {
    static Worker* worker = new Worker();
    return *worker;
  }

  // A second worker, for the MPI variant (always on its condition variable).
  static Worker& GetMpi() {
    static Worker* worker = new Worker();
    return *worker;
  }

  void Post(std::function<void()> callback) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(callback));
      pending_.store(true, std::memory_order_release);
    }
    if (!spin_.load(std::memory_order_acquire)) ready_.notify_one();
  }

  void SetSpin(bool spin) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      spin_.store(spin, std::memory_order_release);
    }
    ready_.notify_one();
  }

 private:
  Worker() : thread_([this] { Run(); }) { thread_.detach(); }

  void Run() {
    std::deque<std::function<void()>> batch;
    for (;;) {
      if (spin_.load(std::memory_order_acquire)) {
        while (!pending_.load(std::memory_order_acquire) && spin_.load(std::memory_order_acquire)) {
          // busy wait: no futex wake-up on the producer's side
        }
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!spin_.load(std::memory_order_relaxed)) {
          ready_.wait(lock,
                      [this] { return !queue_.empty() || spin_.load(std::memory_order_relaxed); });
        }
        batch.swap(queue_);
        pending_.store(false, std::memory_order_relaxed);
      }
      for (auto& callback : batch) callback();
      batch.clear();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  std::atomic<bool> pending_{false};
  std::atomic<bool> spin_{false};
  std::thread thread_;
};

class FloorAsyncThread : public AsyncOpKernel {
 public:
  explicit FloorAsyncThread(OpKernelConstruction* context) : AsyncOpKernel(context) {}
  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    if (!CopyThrough(context)) {
      done();
      return;
    }
    Worker::Get().Post(std::move(done));
  }
};

class FloorSetSpin : public OpKernel {
 public:
  explicit FloorSetSpin(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    Worker::Get().SetSpin(context->input(0).scalar<bool>()());
  }
};

#ifdef FLOOR_WITH_MPI
FLOOR_OP("FloorMpiSync");
FLOOR_OP("FloorMpiAsyncInline");
FLOOR_OP("FloorMpiThread");

MPI_Comm Communicator() {
  static MPI_Comm comm = [] {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    return dup;
  }();
  return comm;
}

// Sums input 0 (float32) over the ranks into output 0; false (status set) on failure.
bool AllreduceInto(OpKernelContext* context, Tensor** output) {
  const Tensor& input = context->input(0);
  absl::Status status = context->allocate_output(0, input.shape(), output);
  if (status.ok() && input.dtype() != tensorflow::DT_FLOAT) {
    status = absl::InvalidArgumentError("the MPI floor ops take float32");
  }
  if (!status.ok()) {
    context->SetStatus(status);
    return false;
  }
  return true;
}

void Allreduce(const Tensor& input, Tensor* output) {
  MPI_Allreduce(input.data(), output->data(), static_cast<int>(input.NumElements()), MPI_FLOAT,
                MPI_SUM, Communicator());
}

class FloorMpiSync : public OpKernel {
 public:
  explicit FloorMpiSync(OpKernelConstruction* context) : OpKernel(context) {}
  void Compute(OpKernelContext* context) override {
    Tensor* output = nullptr;
    if (AllreduceInto(context, &output)) Allreduce(context->input(0), output);
  }
};

class FloorMpiAsyncInline : public AsyncOpKernel {
 public:
  explicit FloorMpiAsyncInline(OpKernelConstruction* context) : AsyncOpKernel(context) {}
  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    Tensor* output = nullptr;
    if (AllreduceInto(context, &output)) Allreduce(context->input(0), output);
    done();
  }
};

class FloorMpiThread : public AsyncOpKernel {
 public:
  explicit FloorMpiThread(OpKernelConstruction* context) : AsyncOpKernel(context) {}
  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    Tensor* output = nullptr;
    if (!AllreduceInto(context, &output)) {
      done();
      return;
    }
    Worker::GetMpi().Post([context, output, done = std::move(done)] {
      Allreduce(context->input(0), output);
      done();
    });
  }
};

REGISTER_KERNEL_BUILDER(Name("FloorMpiSync").Device(tensorflow::DEVICE_CPU), FloorMpiSync);
REGISTER_KERNEL_BUILDER(Name("FloorMpiAsyncInline").Device(tensorflow::DEVICE_CPU),
                        FloorMpiAsyncInline);
REGISTER_KERNEL_BUILDER(Name("FloorMpiThread").Device(tensorflow::DEVICE_CPU), FloorMpiThread);
#endif  // FLOOR_WITH_MPI

REGISTER_KERNEL_BUILDER(Name("FloorSync").Device(tensorflow::DEVICE_CPU), FloorSync);
REGISTER_KERNEL_BUILDER(Name("FloorAsyncInline").Device(tensorflow::DEVICE_CPU), FloorAsyncInline);
REGISTER_KERNEL_BUILDER(Name("FloorAsyncInlineWork").Device(tensorflow::DEVICE_CPU),
                        FloorAsyncInlineWork);
REGISTER_KERNEL_BUILDER(Name("FloorAsyncThread").Device(tensorflow::DEVICE_CPU), FloorAsyncThread);
REGISTER_KERNEL_BUILDER(Name("FloorSetSpin").Device(tensorflow::DEVICE_CPU), FloorSetSpin);

}  // namespace
