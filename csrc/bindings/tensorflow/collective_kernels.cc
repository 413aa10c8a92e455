// Asynchronous TensorFlow kernels for lockstep's collectives.
//
// ComputeAsync hands the tensors to the core. When nothing else is in flight it runs
// one negotiation cycle itself (kUnorderedKernelDrive): a lone op that every rank
// submitted at about the same time then completes, and `done` runs, before
// ComputeAsync returns, without the hand-off to the background thread and back that
// costs a TensorFlow kernel 12-16 us. Otherwise it returns at once, and the core's
// background thread runs the negotiated collective and, through the completion
// callback, sets the outputs and calls `done`. No executor thread blocks for longer
// than that one cycle and the GIL is never involved, so any number of independent
// collectives in one Session run, tf.function or eager program complete in whatever
// order each rank schedules them, and the core fuses those that are ready together.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "lockstep/lockstep.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tf_conversion.h"

namespace lockstep {
namespace tf {
namespace {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

// Collects the outcomes of a kernel's core ops (one, or a group's members) and
// finishes the kernel once the last one is in. Each member's `on_success` sets that
// member's outputs; the first failure becomes the kernel's status.
class Completion : public std::enable_shared_from_this<Completion> {
 public:
  using OnSuccess = std::function<void(OpKernelContext*, const OpResult&)>;

  Completion(OpKernelContext* context, AsyncOpKernel::DoneCallback done, int members)
      : context_(context), done_(std::move(done)), remaining_(members) {}

  lockstep::DoneCallback Member(OnSuccess on_success) {
    std::shared_ptr<Completion> self = shared_from_this();
    return [self, on_success](const Status& status, OpResult result) {
      self->Record(status, result, on_success);
    };
  }

 private:
  void Record(const Status& status, const OpResult& result, const OnSuccess& on_success) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!status.ok()) {
        if (first_error_.ok()) first_error_ = ToTfStatus(status);
      } else if (on_success) {
        on_success(context_, result);
      }
    }
    if (--remaining_ > 0) return;
    if (!first_error_.ok()) context_->SetStatus(first_error_);
    done_();
  }

  OpKernelContext* context_;
  AsyncOpKernel::DoneCallback done_;
  std::atomic<int> remaining_;
  std::mutex mutex_;
  absl::Status first_error_;
};

// Submits ops that report through `callbacks` (one per spec), turning the core's
// refusals into TensorFlow statuses. `drive`: a lone op's cycle may run on this thread.
absl::Status SubmitWithCallbacks(std::vector<OpSpec> specs,
                                 std::vector<lockstep::DoneCallback> callbacks, bool grouped,
                                 bool drive) {
  if (!IsInitialized()) return absl::FailedPreconditionError(NotRunningReason());
  SubmitOptions options;
  options.grouped = grouped;
  options.done = std::move(callbacks);
  if (drive) options.drive = &kUnorderedKernelDrive;
  try {
    Submit(std::move(specs), std::move(options));
  } catch (const Error& error) {
    if (!IsInitialized()) return absl::FailedPreconditionError(NotRunningReason());
    return absl::InvalidArgumentError(error.what());
  }
  return absl::OkStatus();
}

class CollectiveKernel : public AsyncOpKernel {
 public:
  CollectiveKernel(OpKernelConstruction* context, const char* kind)
      : AsyncOpKernel(context), kind_(kind) {
    OP_REQUIRES_OK(context, context->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(context, context->GetAttr("process_set_id", &process_set_id_));
  }

 protected:
  // The negotiation name for this execution: the op's own, or the next automatic one.
  std::string ResolveName() const {
    return tensor_name_.empty() ? AutoName(kind_, process_set_id_) : tensor_name_;
  }

  int process_set_id() const { return process_set_id_; }

  OpSpec SpecFor(OpType op, const Tensor& tensor, std::string name) const {
    OpSpec spec;
    spec.op = op;
    spec.process_set_id = process_set_id_;
    spec.name = std::move(name);
    ToCoreDataType(tensor.dtype(), &spec.dtype);
    spec.shape = ShapeOf(tensor);
    spec.input = tensor.data();
    return spec;
  }

  // One op per input, the members of a group named "<name>.<index>", as the Python
  // frontends name them.
  void RunPerInput(OpKernelContext* context, DoneCallback done,
                   const std::function<OpSpec(int, const std::string&)>& make_spec,
                   const std::function<Completion::OnSuccess(int)>& on_success, bool grouped) {
    const int count = context->num_inputs();
    const std::string name = ResolveName();
    auto completion = std::make_shared<Completion>(context, done, count);
    std::vector<OpSpec> specs;
    std::vector<lockstep::DoneCallback> callbacks;
    for (int i = 0; i < count; ++i) {
      specs.push_back(make_spec(i, grouped ? name + "." + std::to_string(i) : name));
      callbacks.push_back(completion->Member(on_success(i)));
    }
    absl::Status submitted =
        SubmitWithCallbacks(std::move(specs), std::move(callbacks), grouped, /*drive=*/true);
    OP_REQUIRES_OK_ASYNC(context, submitted, done);
  }

 private:
  const char* kind_;
  std::string tensor_name_;
  int process_set_id_ = 0;
};

struct Reduction {
  int reduce_op = 0;
  float prescale = 1.0f;   // float attributes, as in Horovod: the factor is rounded to
  float postscale = 1.0f;  // float32 before the core applies it

  explicit Reduction(OpKernelConstruction* context) {
    OP_REQUIRES_OK(context, context->GetAttr("reduce_op", &reduce_op));
    OP_REQUIRES_OK(context, context->GetAttr("prescale_factor", &prescale));
    OP_REQUIRES_OK(context, context->GetAttr("postscale_factor", &postscale));
  }

  void ApplyTo(OpSpec* spec) const {
    spec->reduce_op = static_cast<ReduceOp>(reduce_op);
    spec->prescale = prescale;
    spec->postscale = postscale;
  }
};

// Allreduce and broadcast write into an output of the input's shape, reusing the
// input's buffer when nothing else holds it.
Tensor* SameShapeOutput(OpKernelContext* context, int index, absl::Status* status) {
  Tensor* output = nullptr;
  *status = context->forward_input_or_allocate_output({index}, index, context->input(index).shape(),
                                                      &output);
  return output;
}

Completion::OnSuccess SetResultOutput(int index) {
  return [index](OpKernelContext* context, const OpResult& result) {
    context->set_output(index, TensorFromResult(context->input_dtype(index), result));
  };
}

class AllreduceKernel : public CollectiveKernel {
 public:
  explicit AllreduceKernel(OpKernelConstruction* context, const char* kind = "allreduce")
      : CollectiveKernel(context, kind), reduction_(context) {}

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    std::vector<void*> outputs;
    for (int i = 0; i < context->num_inputs(); ++i) {
      absl::Status status;
      Tensor* output = SameShapeOutput(context, i, &status);
      OP_REQUIRES_OK_ASYNC(context, status, done);
      outputs.push_back(output->data());
    }
    RunPerInput(
        context, done,
        [&](int i, const std::string& name) {
          OpSpec spec = SpecFor(OpType::kAllreduce, context->input(i), name);
          spec.output = outputs[i];
          reduction_.ApplyTo(&spec);
          return spec;
        },
        [](int) { return Completion::OnSuccess(); }, grouped());
  }

 protected:
  virtual bool grouped() const { return false; }

 private:
  Reduction reduction_;
};

class GroupedAllreduceKernel : public AllreduceKernel {
 public:
  explicit GroupedAllreduceKernel(OpKernelConstruction* context)
      : AllreduceKernel(context, "grouped_allreduce") {}

 protected:
  bool grouped() const override { return true; }
};

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(OpKernelConstruction* context) : CollectiveKernel(context, "broadcast") {
    OP_REQUIRES_OK(context, context->GetAttr("root_rank", &root_rank_));
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    absl::Status status;
    Tensor* output = SameShapeOutput(context, 0, &status);
    OP_REQUIRES_OK_ASYNC(context, status, done);
    RunPerInput(
        context, done,
        [&](int, const std::string& name) {
          OpSpec spec = SpecFor(OpType::kBroadcast, context->input(0), name);
          spec.output = output->data();
          spec.root_rank = root_rank_;
          return spec;
        },
        [](int) { return Completion::OnSuccess(); }, /*grouped=*/false);
  }

 private:
  int root_rank_ = 0;
};

// Allgather and reducescatter: the core allocates each result once every rank's
// rows are known; the output tensor then shares that buffer.
class ResultBufferKernel : public CollectiveKernel {
 public:
  ResultBufferKernel(OpKernelConstruction* context, const char* kind, OpType op, bool grouped,
                     bool reduces)
      : CollectiveKernel(context, kind), op_(op), grouped_(grouped) {
    if (reduces) reduction_ = std::make_unique<Reduction>(context);
  }

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    RunPerInput(
        context, done,
        [&](int i, const std::string& name) {
          OpSpec spec = SpecFor(op_, context->input(i), name);
          if (reduction_) reduction_->ApplyTo(&spec);
          return spec;
        },
        SetResultOutput, grouped_);
  }

 private:
  OpType op_;
  bool grouped_;
  std::unique_ptr<Reduction> reduction_;
};

class AllgatherKernel : public ResultBufferKernel {
 public:
  explicit AllgatherKernel(OpKernelConstruction* context)
      : ResultBufferKernel(context, "allgather", OpType::kAllgather, false, false) {}
};

class GroupedAllgatherKernel : public ResultBufferKernel {
 public:
  explicit GroupedAllgatherKernel(OpKernelConstruction* context)
      : ResultBufferKernel(context, "grouped_allgather", OpType::kAllgather, true, false) {}
};

class ReducescatterKernel : public ResultBufferKernel {
 public:
  explicit ReducescatterKernel(OpKernelConstruction* context)
      : ResultBufferKernel(context, "reducescatter", OpType::kReducescatter, false, true) {}
};

class GroupedReducescatterKernel : public ResultBufferKernel {
 public:
  explicit GroupedReducescatterKernel(OpKernelConstruction* context)
      : ResultBufferKernel(context, "grouped_reducescatter", OpType::kReducescatter, true, true) {}
};

class AlltoallKernel : public CollectiveKernel {
 public:
  explicit AlltoallKernel(OpKernelConstruction* context) : CollectiveKernel(context, "alltoall") {}

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    const Tensor& splits = context->input(1);
    OP_REQUIRES_ASYNC(context, splits.dims() == 1,
                      absl::InvalidArgumentError("splits must be a vector"), done);
    OpSpec spec = SpecFor(OpType::kAlltoall, context->input(0), ResolveName());
    auto values = splits.vec<int32_t>();
    for (int64_t i = 0; i < values.size(); ++i) spec.splits.push_back(values(i));
    auto completion = std::make_shared<Completion>(context, done, 1);
    auto on_success = [](OpKernelContext* ctx, const OpResult& result) {
      ctx->set_output(0, TensorFromResult(ctx->input_dtype(0), result));
      Tensor* received = nullptr;
      const auto ranks = static_cast<int64_t>(result.received_splits.size());
      if (!ctx->allocate_output(1, tensorflow::TensorShape({ranks}), &received).ok()) return;
      auto out = received->vec<int32_t>();
      for (int64_t i = 0; i < ranks; ++i) out(i) = static_cast<int32_t>(result.received_splits[i]);
    };
    std::vector<lockstep::DoneCallback> callbacks{completion->Member(on_success)};
    std::vector<OpSpec> specs;
    specs.push_back(std::move(spec));
    OP_REQUIRES_OK_ASYNC(context,
                         SubmitWithCallbacks(std::move(specs), std::move(callbacks),
                                             /*grouped=*/false, /*drive=*/true),
                         done);
  }
};

class JoinKernel : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    OpSpec spec;
    spec.op = OpType::kJoin;
    auto completion = std::make_shared<Completion>(context, done, 1);
    auto callback = completion->Member([](OpKernelContext* ctx, const OpResult& result) {
      Tensor* last = nullptr;
      if (ctx->allocate_output(0, tensorflow::TensorShape({}), &last).ok()) {
        last->scalar<int32_t>()() = result.join_last_rank;
      }
    });
    OP_REQUIRES_OK_ASYNC(context,
                         SubmitWithCallbacks({spec}, {std::move(callback)}, /*grouped=*/false,
                                             /*drive=*/false),
                         done);
  }
};

class BarrierKernel : public CollectiveKernel {
 public:
  explicit BarrierKernel(OpKernelConstruction* context) : CollectiveKernel(context, "barrier") {}

  void ComputeAsync(OpKernelContext* context, DoneCallback done) override {
    OpSpec spec;
    spec.op = OpType::kBarrier;
    spec.name = ResolveName();
    spec.process_set_id = process_set_id();
    auto completion = std::make_shared<Completion>(context, done, 1);
    auto callback = completion->Member(Completion::OnSuccess());
    OP_REQUIRES_OK_ASYNC(context,
                         SubmitWithCallbacks({spec}, {std::move(callback)}, /*grouped=*/false,
                                             /*drive=*/false),
                         done);
  }
};

#define LOCKSTEP_CPU_KERNEL(op_name, kernel) \
  REGISTER_KERNEL_BUILDER(Name(op_name).Device(tensorflow::DEVICE_CPU), kernel)

LOCKSTEP_CPU_KERNEL("LockstepAllreduce", AllreduceKernel);
LOCKSTEP_CPU_KERNEL("LockstepGroupedAllreduce", GroupedAllreduceKernel);
LOCKSTEP_CPU_KERNEL("LockstepBroadcast", BroadcastKernel);
LOCKSTEP_CPU_KERNEL("LockstepAllgather", AllgatherKernel);
LOCKSTEP_CPU_KERNEL("LockstepGroupedAllgather", GroupedAllgatherKernel);
LOCKSTEP_CPU_KERNEL("LockstepReducescatter", ReducescatterKernel);
LOCKSTEP_CPU_KERNEL("LockstepGroupedReducescatter", GroupedReducescatterKernel);
LOCKSTEP_CPU_KERNEL("LockstepAlltoall", AlltoallKernel);
LOCKSTEP_CPU_KERNEL("LockstepJoin", JoinKernel);
LOCKSTEP_CPU_KERNEL("LockstepBarrier", BarrierKernel);

}  // namespace
}  // namespace tf
}  // namespace lockstep
