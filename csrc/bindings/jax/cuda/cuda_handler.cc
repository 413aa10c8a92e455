// The XLA FFI handler for CUDA buffers: lockstep's collectives inside jitted JAX
// programs on a GPU, through the core's GPU (NCCL) path. Built only with the NCCL
// backend; Python registers it as the CUDA FFI target "lockstep_collective".
//
// XLA's stream is the ready point: each spec carries it, so the core records the
// inputs' ready event on it at enqueue (no host stall) and, before an op completes,
// makes it wait on lockstep's done event. The handler therefore waits on the host only
// until every member's handle completed (negotiated and queued on the GPU, not
// finished), and whatever XLA queues on its stream after the handler returns sees the
// results. It must wait that long: XLA queues the rest of the program as soon as the
// handler returns, and those kernels must come after the stream wait.
//
// A blocking handler cannot rely on the CPU handler's argument against deadlocks
// (futures, so no XLA thread waits on another rank). On a GPU, XLA runs a compiled
// program's thunks in one order fixed at compile time, and every rank compiles the
// same program, so every rank reaches the collectives in the same order.
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../ffi_call.h"
#include "lockstep/lockstep.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace lockstep {
namespace jax {
namespace {

// Every member's outcome, delivered on the core's thread and read by the handler's.
class MemberOutcomes {
 public:
  explicit MemberOutcomes(size_t members)
      : statuses_(members), results_(members), pending_(members) {}

  DoneCallback Member(size_t index) {
    return [this, index](const Status& status, OpResult result) {
      std::lock_guard<std::mutex> lock(mutex_);
      statuses_[index] = status;
      results_[index] = std::move(result);
      if (--pending_ == 0) done_.notify_all();
    };
  }

  // Blocks until every member's callback ran.
  void WaitAll() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
  }

  const Status& status(size_t index) const { return statuses_[index]; }
  OpResult& result(size_t index) { return results_[index]; }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<Status> statuses_;
  std::vector<OpResult> results_;
  size_t pending_;
};

ffi::Error CudaFailure(const std::string& call_name, const char* what, cudaError_t error) {
  return ffi::Error(ffi::ErrorCode::kInternal, "lockstep '" + call_name + "': " + what +
                                                   " failed: " + cudaGetErrorName(error) + " (" +
                                                   cudaGetErrorString(error) + ")");
}

// The GPU that holds the call's buffers: where the first non-empty input lives (CUDA
// says so for any pointer it allocated), else the device XLA runs the program on.
int DeviceOf(const DecodedCall& call, int32_t device_ordinal) {
  for (const OpSpec& spec : call.specs) {
    if (spec.input == nullptr) continue;
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, spec.input) == cudaSuccess &&
        attributes.type == cudaMemoryTypeDevice) {
      return attributes.device;
    }
    cudaGetLastError();  // a failed query must not surface in a later CUDA call
    break;
  }
  return device_ordinal;
}

// Makes `device` current on this thread while in scope (cudaMemcpyAsync queues on a
// stream of the current device's context); restores the previous one.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess || previous_ == device) {
      previous_ = -1;
      return;
    }
    if (cudaSetDevice(device) != cudaSuccess) previous_ = -1;
  }
  ~CurrentDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = -1;
};

// Copies a core-allocated result (and alltoall's received splits) into XLA's buffers
// on XLA's stream, which already waits on lockstep's work. The caller then drops the
// result: its release is ordered after this copy on the same stream.
ffi::Error CopyOut(cudaStream_t stream, const std::string& call_name, const MemberOutput& output,
                   const OpResult& result) {
  ffi::Error size = CheckResultSize(call_name, output, result);
  if (size.failure()) return size;
  if (result.buffer && output.bytes) {
    cudaError_t error = cudaMemcpyAsync(output.data, result.buffer->data(), output.bytes,
                                        cudaMemcpyDefault, stream);
    if (error != cudaSuccess)
      return CudaFailure(call_name, "copying the result into XLA's buffer", error);
  }
  if (output.received_splits && !result.received_splits.empty()) {
    // From pageable host memory: cudaMemcpyAsync returns once it staged the bytes.
    cudaError_t error = cudaMemcpyAsync(output.received_splits, result.received_splits.data(),
                                        result.received_splits.size() * sizeof(int64_t),
                                        cudaMemcpyHostToDevice, stream);
    if (error != cudaSuccess) return CudaFailure(call_name, "copying the received splits", error);
  }
  return ffi::Error::Success();
}

ffi::Error CudaCollective(cudaStream_t stream, int32_t device_ordinal, ffi::RemainingArgs args,
                          ffi::RemainingRets rets, int32_t op, std::string_view name,
                          int32_t reduce_op, double prescale, double postscale, int32_t root_rank,
                          ffi::Span<const int64_t> splits, int32_t process_set_id) {
  CallAttributes call = MakeCallAttributes(op, name, reduce_op, prescale, postscale, root_rank,
                                           splits, process_set_id);
  DecodedCall decoded;
  ffi::Error error = DecodeCall(call, args, rets, &decoded);
  if (error.failure()) return error;

  const int device = DeviceOf(decoded, device_ordinal);
  for (OpSpec& spec : decoded.specs) {
    spec.device = device;
    spec.stream = stream;
  }
  const size_t members = decoded.specs.size();
  MemberOutcomes outcomes(members);
  std::vector<DoneCallback> callbacks;
  for (size_t i = 0; i < members; ++i) callbacks.push_back(outcomes.Member(i));
  try {
    SubmitOptions options;
    options.grouped = members > 1;
    options.done = std::move(callbacks);
    Submit(std::move(decoded.specs), std::move(options));
  } catch (const Error& refused) {
    return ffi::Error::InvalidArgument(refused.what());  // no callback runs after a refusal
  }
  outcomes.WaitAll();

  CurrentDevice current(device);
  ffi::Error outcome = ffi::Error::Success();
  for (size_t i = 0; i < members; ++i) {
    // Every result is dropped here, copied or not: a failed member must not keep the
    // others' device memory.
    OpResult result = std::move(outcomes.result(i));
    if (outcome.failure()) continue;
    outcome = outcomes.status(i).ok() ? CopyOut(stream, call.name, decoded.outputs[i], result)
                                      : FailedOp(outcomes.status(i));
  }
  return outcome;
}

}  // namespace
}  // namespace jax
}  // namespace lockstep

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* LockstepCollectiveCuda(
    XLA_FFI_CallFrame*);

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    LockstepCollectiveCuda, lockstep::jax::CudaCollective,
    lockstep::jax::BindCallAttributes(ffi::Ffi::Bind()
                                          .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                          .Ctx<ffi::DeviceOrdinal>()
                                          .RemainingArgs()
                                          .RemainingRets()));
