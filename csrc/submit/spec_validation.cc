#include "submit/spec_validation.h"

#include <string>

namespace lockstep {
namespace {

[[noreturn]] void Fail(const OpSpec& spec, const std::string& problem) {
  throw Error(std::string(OpTypeName(spec.op)) + " of tensor '" + spec.name + "': " + problem,
              Status::Code::kInvalidArgument);
}

// After ValidateByteCount: a shape with a zero dimension is empty however large its
// other dimensions (their product may not fit), and any other shape's product fits.
int64_t Elements(const OpSpec& spec) {
  for (int64_t d : spec.shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  return n;
}

// Sizes are int64 byte counts everywhere below; a shape whose byte count does not fit
// would wrap around into a small (wrong) size. Called after negative dimensions are
// refused.
void ValidateByteCount(const OpSpec& spec) {
  int64_t bytes = static_cast<int64_t>(DataTypeSize(spec.dtype));
  for (int64_t d : spec.shape) {
    if (d == 0) return;
  }
  for (int64_t d : spec.shape) {
    if (__builtin_mul_overflow(bytes, d, &bytes)) {
      Fail(spec, "the shape holds more than 2^63 bytes");
    }
  }
}

// Adasum, as in Horovod: allreduce of floating tensors on a power-of-2 number of ranks.
void ValidateAdasum(const OpSpec& spec, const Topology& topology) {
  if (spec.op != OpType::kAllreduce) Fail(spec, "the Adasum reduce op applies to allreduce only");
  if (!IsFloatingPoint(spec.dtype)) {
    Fail(spec,
         std::string("Adasum needs a floating-point tensor, got ") + DataTypeName(spec.dtype));
  }
  if ((topology.size & (topology.size - 1)) != 0) {
    Fail(spec, "Adasum needs a power-of-2 number of ranks, but there are " +
                   std::to_string(topology.size));
  }
}

void ValidateReduction(const OpSpec& spec, const Topology& topology) {
  if (!IsValidReduceOp(static_cast<uint8_t>(spec.reduce_op))) Fail(spec, "unknown reduce op");
  if (spec.reduce_op == ReduceOp::kAdasum) ValidateAdasum(spec, topology);
  if (spec.op == OpType::kReducescatter && spec.reduce_op != ReduceOp::kSum &&
      spec.reduce_op != ReduceOp::kAverage) {
    Fail(spec, "reducescatter supports only Sum and Average");
  }
  if (spec.dtype == DataType::kBool) {
    if (spec.reduce_op == ReduceOp::kAverage) Fail(spec, kBoolAverageError);
    if (spec.prescale != 1.0 || spec.postscale != 1.0) Fail(spec, kBoolScaleError);
  }
}

void ValidateAlltoallSplits(const OpSpec& spec, const Topology& topology) {
  const int64_t rows = spec.shape[0];
  if (spec.splits.empty()) {
    if (rows % topology.size != 0) {
      Fail(spec, "first dimension " + std::to_string(rows) + " is not divisible by " +
                     std::to_string(topology.size) + " ranks; pass splits");
    }
    return;
  }
  if (static_cast<int>(spec.splits.size()) != topology.size) {
    Fail(spec, "splits has " + std::to_string(spec.splits.size()) + " entries but there are " +
                   std::to_string(topology.size) + " ranks");
  }
  int64_t sum = 0;
  for (int64_t s : spec.splits) {
    if (s < 0) Fail(spec, "splits must be non-negative");
    sum += s;
  }
  if (sum != rows) {
    Fail(spec, "splits sum to " + std::to_string(sum) + " but the first dimension is " +
                   std::to_string(rows));
  }
}

}  // namespace

void ValidateSpec(const OpSpec& spec, const Topology& topology,
                  const std::string& gpu_unavailable) {
  if (spec.name.empty() && spec.op != OpType::kJoin) Fail(spec, "a name is required");
  if (!IsValidOpType(static_cast<uint8_t>(spec.op))) Fail(spec, "unknown op type");
  if (spec.op == OpType::kProcessSetChange) {
    Fail(spec, "process sets change through add_process_set and remove_process_set only");
  }
  if (!IsValidDataType(static_cast<uint8_t>(spec.dtype))) Fail(spec, "unsupported data type");
  if (spec.device >= 0 && !gpu_unavailable.empty()) {
    Fail(spec, "the tensor is on GPU " + std::to_string(spec.device) + ", but " + gpu_unavailable);
  }
  if (spec.op == OpType::kBarrier || spec.op == OpType::kJoin) return;
  for (int64_t d : spec.shape) {
    if (d < 0) Fail(spec, "negative dimension in shape");
  }
  ValidateByteCount(spec);
  const bool needs_rows = spec.op == OpType::kAllgather || spec.op == OpType::kAlltoall ||
                          spec.op == OpType::kReducescatter;
  if (needs_rows && spec.shape.empty()) Fail(spec, "needs a tensor with at least one dimension");
  if (Elements(spec) > 0 && spec.input == nullptr) Fail(spec, "input memory is null");
  const bool writes_output = spec.op == OpType::kAllreduce || spec.op == OpType::kBroadcast;
  if (writes_output && Elements(spec) > 0 && spec.output == nullptr) {
    Fail(spec, "output memory is null");
  }
  if (spec.op == OpType::kAllreduce || spec.op == OpType::kReducescatter) {
    ValidateReduction(spec, topology);
  }
  if (spec.op == OpType::kBroadcast && (spec.root_rank < 0 || spec.root_rank >= topology.size)) {
    Fail(spec, "root rank " + std::to_string(spec.root_rank) + " is outside [0, " +
                   std::to_string(topology.size) + ")");
  }
  if (spec.op == OpType::kAlltoall) ValidateAlltoallSplits(spec, topology);
}

Request RequestFromSpec(const OpSpec& spec, int rank) {
  Request request;
  request.rank = rank;
  request.op = spec.op;
  request.dtype = spec.dtype;
  request.reduce_op = spec.reduce_op;
  request.root_rank = spec.root_rank;
  // Where the tensor lives (-1 host, 0 a GPU), not which GPU: each rank drives its own
  // (one process per GPU), so ordinals differ across ranks while the op agrees. The
  // GPU collectives use the local spec's device.
  request.device = spec.device >= 0 ? 0 : -1;
  request.prescale = spec.prescale;
  request.postscale = spec.postscale;
  request.name = spec.name;
  request.shape = spec.shape;
  request.splits = spec.splits;
  return request;
}

}  // namespace lockstep
