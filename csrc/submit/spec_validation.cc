#include "submit/spec_validation.h"

#include <initializer_list>
#include <string>
#include <vector>

namespace lockstep {
namespace {

[[noreturn]] void Fail(const OpSpec& spec, const std::string& problem,
                       Status::Code code = Status::Code::kInvalidArgument) {
  // An op checked while a graph is built has no name yet.
  const std::string what =
      spec.name.empty() ? std::string(OpTypeName(spec.op))
                        : std::string(OpTypeName(spec.op)) + " of tensor '" + spec.name + "'";
  throw Error(what + ": " + problem, code);
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

// "there are 4 ranks", or "process set 2 has 4 ranks": the count a check used.
std::string RanksOf(const OpSpec& spec, int count) {
  const std::string ranks = std::to_string(count) + (count == 1 ? " rank" : " ranks");
  if (spec.process_set_id == 0) return "there are " + ranks;
  return "process set " + std::to_string(spec.process_set_id) + " has " + ranks;
}

// The values, the first 16 of them for a long list.
std::string Describe(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i == 16) {
      text += ", ... (" + std::to_string(values.size()) + " in all)";
      break;
    }
    if (i > 0) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

std::string OpsList(std::initializer_list<ReduceOp> ops) {
  std::string text;
  for (ReduceOp op : ops) {
    if (!text.empty()) text += " or ";
    text += std::string(ReduceOpName(op)) + " (" + std::to_string(static_cast<int>(op)) + ")";
  }
  return text;
}

// Adasum, as in Horovod: allreduce (ValidateReduction refuses it for reducescatter) of
// floating tensors on a power-of-2 number of ranks.
void ValidateAdasum(const OpSpec& spec, int set_size) {
  if (!IsFloatingPoint(spec.dtype)) {
    Fail(spec,
         std::string("Adasum needs a floating-point tensor, got ") + DataTypeName(spec.dtype));
  }
  if ((set_size & (set_size - 1)) != 0) {
    Fail(spec, "Adasum needs a power-of-2 number of ranks; " + RanksOf(spec, set_size),
         Status::Code::kUnimplemented);
  }
}

void ValidateReduction(const OpSpec& spec, int set_size) {
  if (!IsValidReduceOp(static_cast<uint8_t>(spec.reduce_op))) Fail(spec, "unknown reduce op");
  if (spec.op == OpType::kReducescatter && spec.reduce_op != ReduceOp::kSum &&
      spec.reduce_op != ReduceOp::kAverage) {
    const std::string why =
        spec.reduce_op == ReduceOp::kAdasum ? " (Adasum is for allreduce only)" : "";
    Fail(spec,
         std::string("reduce op ") + ReduceOpName(spec.reduce_op) + " is not supported" + why +
             "; reducescatter takes " + OpsList({ReduceOp::kAverage, ReduceOp::kSum}),
         Status::Code::kUnsupported);
  }
  if (spec.reduce_op == ReduceOp::kAdasum) ValidateAdasum(spec, set_size);
  if (spec.dtype == DataType::kBool) {
    if (spec.reduce_op == ReduceOp::kAverage) Fail(spec, kBoolAverageError);
    if (spec.prescale != 1.0 || spec.postscale != 1.0) Fail(spec, kBoolScaleError);
  }
}

// `rows`: the first dimension, negative where it is not known yet.
void ValidateAlltoallSplits(const OpSpec& spec, int64_t rows, int set_size) {
  if (spec.splits.empty()) {
    if (rows >= 0 && rows % set_size != 0) {
      Fail(spec,
           "without splits the first dimension must be divisible by the number of ranks, but " +
               std::to_string(rows) + " is not (" + RanksOf(spec, set_size) +
               "); pass splits= for an uneven split");
    }
    return;
  }
  if (spec.splits.size() != static_cast<size_t>(set_size)) {
    const size_t count = spec.splits.size();
    Fail(spec, "splits has " + std::to_string(count) + (count == 1 ? " entry" : " entries") +
                   " but " + RanksOf(spec, set_size) + "; give one per rank");
  }
  int64_t sum = 0;
  for (int64_t s : spec.splits) {
    if (s < 0) Fail(spec, "splits must be non-negative, got " + Describe(spec.splits));
    if (__builtin_add_overflow(sum, s, &sum)) {
      Fail(spec, "splits " + Describe(spec.splits) + " sum to more than 2^63");
    }
  }
  if (rows >= 0 && sum != rows) {
    Fail(spec, "splits " + Describe(spec.splits) + " sum to " + std::to_string(sum) +
                   " but the tensor's first dimension is " + std::to_string(rows));
  }
}

}  // namespace

void ValidateArguments(const OpSpec& spec, int set_size, int world_size, bool rank_known) {
  if (spec.op == OpType::kBarrier || spec.op == OpType::kJoin) return;
  if (set_size < 1 || world_size < set_size) {
    Fail(spec,
         "internal error: checked against " + std::to_string(set_size) + " of " +
             std::to_string(world_size) + " ranks",
         Status::Code::kInternal);
  }
  const bool needs_rows = spec.op == OpType::kAllgather || spec.op == OpType::kAlltoall ||
                          spec.op == OpType::kReducescatter;
  if (needs_rows && rank_known && spec.shape.empty()) {
    Fail(spec, "needs a tensor with at least one dimension (it works on rows), got a 0-d tensor");
  }
  if (spec.op == OpType::kAllreduce || spec.op == OpType::kReducescatter) {
    ValidateReduction(spec, set_size);
  }
  if (spec.op == OpType::kBroadcast && (spec.root_rank < 0 || spec.root_rank >= world_size)) {
    Fail(spec, "root_rank " + std::to_string(spec.root_rank) + " is out of range: there are " +
                   std::to_string(world_size) + " ranks (0.." + std::to_string(world_size - 1) +
                   ")");
  }
  if (spec.op == OpType::kAlltoall) {
    const int64_t rows = rank_known && !spec.shape.empty() ? spec.shape[0] : -1;
    ValidateAlltoallSplits(spec, rows, set_size);
  }
}

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
  ValidateArguments(spec, topology.size, topology.size);
  if (Elements(spec) > 0 && spec.input == nullptr) Fail(spec, "input memory is null");
  const bool writes_output = spec.op == OpType::kAllreduce || spec.op == OpType::kBroadcast;
  if (writes_output && Elements(spec) > 0 && spec.output == nullptr) {
    Fail(spec, "output memory is null");
  }
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
