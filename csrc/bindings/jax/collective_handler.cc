// XLA FFI handler that runs lockstep collectives inside compiled JAX programs.
//
// One handler serves every collective kind (the `op` attribute says which). It hands
// all its buffers to the core at once (a pytree becomes one group, which the core
// negotiates as a unit and fuses) and returns an ffi::Future. Before returning, the XLA
// thread runs the negotiation itself for a short budget (Submit with a KernelDrive):
// when every rank arrives at about the same time, the collective is done by then and
// the future is returned complete, without waking any other thread. Otherwise the
// core's background thread completes it later, through a completion thread (so that
// XLA's continuation never runs on lockstep's thread). No XLA thread blocks on another
// rank beyond that budget, so however XLA orders independent collectives on each
// rank, every rank eventually submits all of them and none can deadlock.
//
// Argument decoding and naming are shared with the CUDA handler (ffi_call.h).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "completion_thread.h"
#include "ffi_call.h"
#include "lockstep/lockstep.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace lockstep {
namespace jax {
namespace {

// The call whose handler is running cycles on this thread: its members' callbacks may
// complete the future here, before the handler returns it.
thread_local const void* t_driving_call = nullptr;

class DrivingCall {
 public:
  explicit DrivingCall(const void* call) { t_driving_call = call; }
  ~DrivingCall() { t_driving_call = nullptr; }
  DrivingCall(const DrivingCall&) = delete;
  DrivingCall& operator=(const DrivingCall&) = delete;
};

// Counts the members down; the first failure becomes the call's error. Results are
// copied on the core's thread; the future completes on the completion thread. It
// holds the members' outputs, so that each callback carries only an index.
class Completion : public std::enable_shared_from_this<Completion> {
 public:
  Completion(std::string name, std::vector<MemberOutput> outputs)
      : name_(std::move(name)),
        outputs_(std::move(outputs)),
        countdown_(static_cast<int>(outputs_.size())) {}

  ffi::Future MakeFuture() { return ffi::Future(countdown_); }

  DoneCallback Member(size_t index) {
    return [self = shared_from_this(), index](const Status& status, OpResult result) {
      ffi::Error outcome = self->Finish(self->outputs_[index], status, result);
      if (t_driving_call == self.get()) {
        self->countdown_.CountDown(outcome);
      } else {
        PostCompletion([self, outcome] { self->countdown_.CountDown(outcome); });
      }
    };
  }

 private:
  ffi::Error Finish(const MemberOutput& output, const Status& status, const OpResult& result) {
    if (!status.ok()) return FailedOp(status);
    ffi::Error size = CheckResultSize(name_, output, result);
    if (size.failure()) return size;
    if (result.buffer && output.bytes)
      std::memcpy(output.data, result.buffer->data(), output.bytes);
    if (output.received_splits) {
      auto* splits = static_cast<int64_t*>(output.received_splits);
      for (size_t i = 0; i < result.received_splits.size(); ++i)
        splits[i] = result.received_splits[i];
    }
    return ffi::Error::Success();
  }

  std::string name_;
  std::vector<MemberOutput> outputs_;
  ffi::CountDownPromise countdown_;
};

ffi::Future Failed(ffi::Error error) {
  ffi::Promise promise;
  ffi::Future future(promise);
  promise.SetError(std::move(error));
  return future;
}

ffi::Future Collective(ffi::RemainingArgs args, ffi::RemainingRets rets, int32_t op,
                       std::string_view name, int32_t reduce_op, double prescale, double postscale,
                       int32_t root_rank, ffi::Span<const int64_t> splits, int32_t process_set_id) {
  CallAttributes call = MakeCallAttributes(op, name, reduce_op, prescale, postscale, root_rank,
                                           splits, process_set_id);
  DecodedCall decoded;
  ffi::Error error = DecodeCall(call, args, rets, &decoded);
  if (error.failure()) return Failed(std::move(error));

  const size_t members = decoded.specs.size();
  // Owned by the callbacks and their posted completions (each holds a shared_ptr).
  auto completion = std::make_shared<Completion>(call.name, std::move(decoded.outputs));
  std::vector<DoneCallback> callbacks;
  callbacks.reserve(members);
  for (size_t i = 0; i < members; ++i) callbacks.push_back(completion->Member(i));
  ffi::Future future = completion->MakeFuture();
  try {
    DrivingCall driving(completion.get());
    SubmitOptions options;
    options.grouped = members > 1;
    options.done = std::move(callbacks);
    options.drive = &kInOrderKernelDrive;
    Submit(std::move(decoded.specs), std::move(options));
  } catch (const Error& refused) {
    // No callback runs after a refusal, so the future is still pending: fail it here.
    for (size_t i = 0; i < members; ++i) {
      completion->Member(i)(Status::InvalidArgument(refused.what()), OpResult{});
    }
  }
  return future;
}

}  // namespace
}  // namespace jax
}  // namespace lockstep

// The library exports only its handlers (the rest is hidden): Python wraps this one in
// a PyCapsule and registers it as the CPU FFI target "lockstep_collective".
extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* LockstepCollective(
    XLA_FFI_CallFrame*);

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    LockstepCollective, lockstep::jax::Collective,
    lockstep::jax::BindCallAttributes(ffi::Ffi::Bind().RemainingArgs().RemainingRets()));
