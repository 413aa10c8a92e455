#include "ffi_call.h"

#include <utility>

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
    case Status::Code::kUnsupported:
      return ffi::ErrorCode::kInvalidArgument;
    case Status::Code::kUnimplemented:
      return ffi::ErrorCode::kUnimplemented;
    case Status::Code::kPrecondition:
      return ffi::ErrorCode::kFailedPrecondition;
    case Status::Code::kAborted:
      return ffi::ErrorCode::kAborted;
    default:
      return ffi::ErrorCode::kInternal;
  }
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

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

}  // namespace

CallAttributes MakeCallAttributes(int32_t op, std::string_view name, int32_t reduce_op,
                                  double prescale, double postscale, int32_t root_rank,
                                  ffi::Span<const int64_t> splits, int32_t process_set_id) {
  return CallAttributes{static_cast<OpType>(op),
                        std::string(name),
                        static_cast<ReduceOp>(reduce_op),
                        prescale,
                        postscale,
                        root_rank,
                        std::vector<int64_t>(splits.begin(), splits.end()),
                        process_set_id};
}

bool CoreAllocatesResult(OpType op) {
  return op == OpType::kAllgather || op == OpType::kAlltoall || op == OpType::kReducescatter;
}

ffi::Error DecodeCall(const CallAttributes& call, ffi::RemainingArgs args, ffi::RemainingRets rets,
                      DecodedCall* decoded) {
  const size_t members = args.size();
  // Alltoall with splits has one extra result: the received splits (int64 per rank).
  const bool wants_splits = call.op == OpType::kAlltoall && rets.size() == members + 1;
  if (members == 0 || (rets.size() != members && !wants_splits)) {
    return ffi::Error::InvalidArgument("lockstep: inputs and outputs of a call do not pair up");
  }
  if (!IsInitialized()) return ffi::Error(ffi::ErrorCode::kFailedPrecondition, NotRunningReason());
  for (size_t i = 0; i < members; ++i) {
    auto input = args.get<ffi::AnyBuffer>(i);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (!input.has_value() || !out.has_value()) return ffi::Error::Internal("lockstep: bad buffer");
    DataType dtype;
    if (!ToCoreDataType(input->element_type(), &dtype)) {
      return ffi::Error::InvalidArgument("lockstep '" + call.name + "': unsupported element type");
    }
    MemberOutput output = OutputFor(*out);
    if (wants_splits) {
      // int64 per rank; without jax_enable_x64 JAX hands over int32 pairs of the same size.
      output.received_splits = (*rets.get<ffi::AnyBuffer>(members))->untyped_data();
    }
    std::string name = members == 1 ? call.name : call.name + "." + std::to_string(i);
    decoded->specs.push_back(SpecFor(call, *input, output.data, std::move(name), dtype));
    decoded->outputs.push_back(std::move(output));
  }
  return ffi::Error::Success();
}

ffi::Error FailedOp(const Status& status) {
  return ffi::Error(ToFfiCode(status.code()), status.message());
}

ffi::Error CheckResultSize(const std::string& call_name, const MemberOutput& output,
                           const OpResult& result) {
  if (!result.buffer || result.buffer->size() == output.bytes) return ffi::Error::Success();
  return ffi::Error(
      ffi::ErrorCode::kFailedPrecondition,
      "lockstep '" + call_name + "': inside jax.jit the result shape is fixed when tracing (" +
          ShapeString(output.traced_shape) + ") but the ranks' inputs produced " +
          ShapeString(result.shape) +
          "; pass the sizes of every rank (allgather sizes=, alltoall received_splits=) or give "
          "every rank the same shape");
}

}  // namespace jax
}  // namespace lockstep
