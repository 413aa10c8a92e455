// XLA FFI handler that runs lockstep collectives inside compiled JAX programs.
//
// One handler serves every collective kind (the `op` attribute says which). It hands
// all its buffers to the core at once (a pytree becomes one group, which the core
// negotiates as a unit and fuses) and returns an ffi::Future at once: the core's
// background thread completes the future when the collective is done. No XLA thread
// ever blocks on another rank, so however XLA orders independent collectives on each
// rank, every rank eventually submits all of them and none can deadlock.
//
// Names are fixed when the program is traced (Python passes `name`), so they match
// across ranks however XLA schedules the calls; a group's members are "<name>.<i>",
// as the Python frontends name them.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "completion_thread.h"
#include "lockstep/lockstep.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace lockstep {
namespace jax {
namespace {

bool ToCoreDataType(ffi::DataType type, DataType* out) {
  switch (type) {
    case ffi::DataType::PRED:
      *out = DataType::kBool;
      return true;
    case ffi::DataType::U8:
      *out = DataType::kUInt8;
      return true;
    case ffi::DataType::S8:
      *out = DataType::kInt8;
      return true;
    case ffi::DataType::U16:
      *out = DataType::kUInt16;
      return true;
    case ffi::DataType::S16:
      *out = DataType::kInt16;
      return true;
    case ffi::DataType::S32:
      *out = DataType::kInt32;
      return true;
    case ffi::DataType::S64:
      *out = DataType::kInt64;
      return true;
    case ffi::DataType::F16:
      *out = DataType::kFloat16;
      return true;
    case ffi::DataType::BF16:
      *out = DataType::kBFloat16;
      return true;
    case ffi::DataType::F32:
      *out = DataType::kFloat32;
      return true;
    case ffi::DataType::F64:
      *out = DataType::kFloat64;
      return true;
    default:
      return false;
  }
}

ffi::ErrorCode ToFfiCode(Status::Code code) {
  switch (code) {
    case Status::Code::kInvalidArgument:
      return ffi::ErrorCode::kInvalidArgument;
    case Status::Code::kPrecondition:
      return ffi::ErrorCode::kFailedPrecondition;
    case Status::Code::kAborted:
      return ffi::ErrorCode::kAborted;
    default:
      return ffi::ErrorCode::kInternal;
  }
}

// The parameters every member of one call shares (the FFI attributes).
struct CallAttributes {
  OpType op;
  std::string name;
  ReduceOp reduce_op;
  double prescale;
  double postscale;
  int root_rank;
  std::vector<int64_t> splits;
  int32_t process_set_id;
};

// Ops whose result the core allocates (its size is only known after negotiation):
// the completion copies it into XLA's output, whose shape was fixed at trace time.
bool CoreAllocatesResult(OpType op) {
  return op == OpType::kAllgather || op == OpType::kAlltoall || op == OpType::kReducescatter;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// Where one member's result goes, and (alltoall) where its received splits go.
struct MemberOutput {
  void* data = nullptr;
  size_t bytes = 0;
  std::vector<int64_t> traced_shape;
  int64_t* received_splits = nullptr;  // null unless the call asked for them
};

// Counts the members down; the first failure becomes the call's error. Results are
// copied on the core's thread; the future completes on the completion thread.
class Completion : public std::enable_shared_from_this<Completion> {
 public:
  Completion(std::string name, int members) : name_(std::move(name)), countdown_(members) {}

  ffi::Future MakeFuture() { return ffi::Future(countdown_); }

  DoneCallback Member(const MemberOutput& output) {
    std::shared_ptr<Completion> self = shared_from_this();
    return [self, output](const Status& status, OpResult result) {
      ffi::Error outcome = self->Finish(output, status, result);
      PostCompletion([self, outcome] { self->countdown_.CountDown(outcome); });
    };
  }

 private:
  ffi::Error Finish(const MemberOutput& output, const Status& status, const OpResult& result) {
    if (!status.ok()) return ffi::Error(ToFfiCode(status.code()), status.message());
    if (result.buffer) {
      if (result.buffer->size() != output.bytes) {
        return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                          "lockstep '" + name_ +
                              "': inside jax.jit the result shape is fixed when " + "tracing (" +
                              ShapeString(output.traced_shape) + ") but the ranks' inputs " +
                              "produced " + ShapeString(result.shape) +
                              "; pass the sizes of every rank (allgather sizes=, alltoall " +
                              "received_splits=) or give every rank the same shape");
      }
      if (output.bytes) std::memcpy(output.data, result.buffer->data(), output.bytes);
    }
    if (output.received_splits) {
      for (size_t i = 0; i < result.received_splits.size(); ++i) {
        output.received_splits[i] = result.received_splits[i];
      }
    }
    return ffi::Error::Success();
  }

  std::string name_;
  ffi::CountDownPromise countdown_;
};

OpSpec SpecFor(const CallAttributes& call, const ffi::AnyBuffer& input, void* output,
               std::string name, DataType dtype) {
  OpSpec spec;
  spec.op = call.op;
  spec.name = std::move(name);
  spec.dtype = dtype;
  auto dims = input.dimensions();
  spec.shape.assign(dims.begin(), dims.end());
  spec.input = input.untyped_data();
  spec.output = CoreAllocatesResult(call.op) ? nullptr : output;
  spec.reduce_op = call.reduce_op;
  spec.prescale = call.prescale;
  spec.postscale = call.postscale;
  spec.root_rank = call.root_rank;
  spec.splits = call.splits;
  spec.process_set_id = call.process_set_id;
  return spec;
}

MemberOutput OutputFor(ffi::Result<ffi::AnyBuffer> out) {
  MemberOutput output;
  output.data = out->untyped_data();
  output.bytes = out->size_bytes();
  auto dims = out->dimensions();
  output.traced_shape.assign(dims.begin(), dims.end());
  return output;
}

// Builds the specs and completions for every (input, output) pair, then submits them.
ffi::Future Run(const CallAttributes& call, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  const size_t members = args.size();
  // Alltoall with splits has one extra result: the received splits (int64 per rank).
  const bool wants_splits = call.op == OpType::kAlltoall && rets.size() == members + 1;
  auto failed = [](ffi::Error error) {
    ffi::Promise promise;
    ffi::Future future(promise);
    promise.SetError(std::move(error));
    return future;
  };
  if (members == 0 || (rets.size() != members && !wants_splits)) {
    return failed(
        ffi::Error::InvalidArgument("lockstep: inputs and outputs of a call do not pair up"));
  }
  if (!IsInitialized())
    return failed(ffi::Error(ffi::ErrorCode::kFailedPrecondition, NotRunningReason()));

  // Owned by the callbacks and their posted completions (each holds a shared_ptr).
  auto completion = std::make_shared<Completion>(call.name, static_cast<int>(members));
  std::vector<OpSpec> specs;
  std::vector<DoneCallback> callbacks;
  for (size_t i = 0; i < members; ++i) {
    auto input = args.get<ffi::AnyBuffer>(i);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (!input.has_value() || !out.has_value())
      return failed(ffi::Error::Internal("lockstep: bad buffer"));
    DataType dtype;
    if (!ToCoreDataType(input->element_type(), &dtype)) {
      return failed(
          ffi::Error::InvalidArgument("lockstep '" + call.name + "': unsupported element type"));
    }
    MemberOutput output = OutputFor(*out);
    if (wants_splits) {
      // int64 per rank; without jax_enable_x64 JAX hands over int32 pairs of the same size.
      output.received_splits =
          static_cast<int64_t*>((*rets.get<ffi::AnyBuffer>(members))->untyped_data());
    }
    std::string name = members == 1 ? call.name : call.name + "." + std::to_string(i);
    specs.push_back(SpecFor(call, *input, output.data, std::move(name), dtype));
    callbacks.push_back(completion->Member(output));
  }
  ffi::Future future = completion->MakeFuture();
  try {
    if (members == 1) {
      EnqueueWithCallback(std::move(specs.front()), std::move(callbacks.front()));
    } else {
      EnqueueGroupWithCallbacks(std::move(specs), std::move(callbacks));
    }
  } catch (const Error& error) {
    // No callback runs after a refusal, so the future is still pending: fail it here.
    for (size_t i = 0; i < members; ++i) {
      completion->Member(MemberOutput{})(Status::InvalidArgument(error.what()), OpResult{});
    }
  }
  return future;
}

ffi::Future Collective(ffi::RemainingArgs args, ffi::RemainingRets rets, int32_t op,
                       std::string_view name, int32_t reduce_op, double prescale, double postscale,
                       int32_t root_rank, ffi::Span<const int64_t> splits, int32_t process_set_id) {
  CallAttributes call{static_cast<OpType>(op),
                      std::string(name),
                      static_cast<ReduceOp>(reduce_op),
                      prescale,
                      postscale,
                      root_rank,
                      std::vector<int64_t>(splits.begin(), splits.end()),
                      process_set_id};
  return Run(call, args, rets);
}

}  // namespace
}  // namespace jax
}  // namespace lockstep

// The one symbol the library exports (the rest is hidden): Python wraps it in a
// PyCapsule and registers it as the FFI target "lockstep_collective".
extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* LockstepCollective(
    XLA_FFI_CallFrame*);

XLA_FFI_DEFINE_HANDLER_SYMBOL(LockstepCollective, lockstep::jax::Collective,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<int32_t>("op")
                                  .Attr<std::string_view>("name")
                                  .Attr<int32_t>("reduce_op")
                                  .Attr<double>("prescale")
                                  .Attr<double>("postscale")
                                  .Attr<int32_t>("root_rank")
                                  .Attr<ffi::Span<const int64_t>>("splits")
                                  .Attr<int32_t>("process_set_id"));
