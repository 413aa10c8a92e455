#include "negotiation/response_builder.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "wire/process_set_change.h"

namespace lockstep {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

std::vector<int64_t> Tail(const std::vector<int64_t>& shape) {
  return shape.empty() ? shape : std::vector<int64_t>(shape.begin() + 1, shape.end());
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Finds the first rank whose request disagrees with the reference on one property
// and phrases the error around that property.
class Checker {
 public:
  Checker(const std::vector<const Request*>& by_rank, const Request& ref, int ref_rank)
      : by_rank_(by_rank), ref_(ref), ref_rank_(ref_rank) {}

  template <typename Get, typename Show>
  bool Same(const char* what, Get get, Show show) {
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      const Request* req = by_rank_[r];
      if (req == nullptr || get(*req) == get(ref_)) continue;
      std::ostringstream out;
      out << "Mismatched " << what << " for " << OpTypeName(ref_.op) << " of tensor '" << ref_.name
          << "': rank " << ref_rank_ << " sent " << show(get(ref_)) << " but rank " << r << " sent "
          << show(get(*req));
      error_ = out.str();
      return false;
    }
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  const std::vector<const Request*>& by_rank_;
  const Request& ref_;
  int ref_rank_;
  std::string error_;
};

std::string Quote(const char* text) { return std::string(text); }

// `what` is the op as the error names it.
std::string JoinError(const std::string& what, const std::vector<const Request*>& by_rank) {
  std::ostringstream out;
  out << "Cannot run " << what << " because rank(s)";
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r] == nullptr) out << " " << r;
  }
  out << " have joined; after join() only allreduce with Sum or Average can proceed";
  return out.str();
}

std::string TensorOp(const Request& request) {
  return std::string(OpTypeName(request.op)) + " of tensor '" + request.name + "'";
}

// Bytes of this host's memory; 0 if unknown.
int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

// The largest result any rank must allocate for an allgather or alltoall: rows
// received times the bytes of one row. Refused here, on the coordinator, so that every
// rank gets the same error before any rank allocates or communicates; a size that
// cannot fit in memory would otherwise fail on some ranks only, or wrap around.
std::string ResultSizeProblem(const Response& response, int ranks) {
  // sizes holds rows per rank (allgather: all of them are received by every rank) or
  // per (sender, receiver) pair (alltoall).
  const bool per_pair = response.type == ResponseType::kAlltoall;
  int64_t row_bytes = static_cast<int64_t>(DataTypeSize(response.dtype));
  bool overflow = false;
  for (int64_t d : Tail(response.shape))
    overflow |= __builtin_mul_overflow(row_bytes, d, &row_bytes);
  int64_t largest = 0;
  for (int receiver = 0; receiver < (per_pair ? ranks : 1) && !overflow; ++receiver) {
    int64_t rows = 0;
    for (size_t i = 0; i < response.sizes.size(); ++i) {
      if (per_pair && static_cast<int>(i % ranks) != receiver) continue;
      overflow |= __builtin_add_overflow(rows, response.sizes[i], &rows);
    }
    int64_t bytes = 0;
    overflow |= __builtin_mul_overflow(rows, row_bytes, &bytes);
    largest = std::max(largest, bytes);
  }
  std::ostringstream out;
  out << OpTypeName(static_cast<OpType>(response.type)) << " of tensor '" << response.names.front()
      << "': the result would need ";
  if (overflow) {
    out << "more than 2^63 bytes";
    return out.str();
  }
  const int64_t memory = PhysicalMemoryBytes();
  if (memory == 0 || largest <= memory) return "";
  out << largest << " bytes on one rank, more than this host's " << memory << " bytes of memory";
  return out.str();
}

}  // namespace

Response ErrorResponse(const std::string& name, const std::string& message) {
  Response response;
  response.type = ResponseType::kError;
  response.names = {name};
  response.error_message = message;
  return response;
}

Response BuildResponse(const std::vector<const Request*>& by_rank) {
  int ref_rank = 0;
  while (by_rank[ref_rank] == nullptr) ++ref_rank;
  const Request& ref = *by_rank[ref_rank];
  const int size = static_cast<int>(by_rank.size());
  bool any_joined = false;
  for (const Request* r : by_rank) any_joined |= (r == nullptr);

  Checker check(by_rank, ref, ref_rank);
  auto op_name = [](OpType o) { return Quote(OpTypeName(o)); };
  auto dtype_name = [](DataType d) { return Quote(DataTypeName(d)); };
  auto reduce_name = [](ReduceOp o) { return Quote(ReduceOpName(o)); };
  // Requests say where a tensor lives, not which GPU: ranks drive different GPUs.
  auto memory_kind = [](int32_t device) {
    return std::string(device < 0 ? "host memory" : "GPU memory");
  };
  auto number = [](auto v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  bool ok = check.Same(
                "operations", [](const Request& r) { return r.op; }, op_name) &&
            check.Same(
                "data types", [](const Request& r) { return r.dtype; }, dtype_name) &&
            check.Same(
                "devices", [](const Request& r) { return r.device; }, memory_kind);
  const bool reduces = ref.op == OpType::kAllreduce || ref.op == OpType::kReducescatter;
  if (ok && reduces) {
    ok = check.Same(
             "reduce ops", [](const Request& r) { return r.reduce_op; }, reduce_name) &&
         check.Same(
             "prescale factors", [](const Request& r) { return r.prescale; }, number) &&
         check.Same(
             "postscale factors", [](const Request& r) { return r.postscale; }, number);
  }
  if (ok && (reduces || ref.op == OpType::kBroadcast)) {
    ok = check.Same(
        "shapes", [](const Request& r) { return r.shape; }, ShapeText);
  }
  if (ok && ref.op == OpType::kBroadcast) {
    ok = check.Same(
        "root ranks", [](const Request& r) { return r.root_rank; }, number);
  }
  if (ok && (ref.op == OpType::kAllgather || ref.op == OpType::kAlltoall)) {
    ok = check.Same(
        "shapes beyond the first dimension", [](const Request& r) { return Tail(r.shape); },
        ShapeText);
  }
  if (!ok) return ErrorResponse(ref.name, check.error());

  if (any_joined && !(ref.op == OpType::kAllreduce &&
                      (ref.reduce_op == ReduceOp::kSum || ref.reduce_op == ReduceOp::kAverage))) {
    return ErrorResponse(ref.name, JoinError(TensorOp(ref), by_rank));
  }

  Response response;
  response.type = static_cast<ResponseType>(ref.op);
  response.dtype = ref.dtype;
  response.reduce_op = ref.reduce_op;
  response.root_rank = ref.root_rank;
  response.device = ref.device;
  response.prescale = ref.prescale;
  response.postscale = ref.postscale;
  response.names = {ref.name};
  response.shape = ref.shape;
  response.group_id = ref.group_id;
  switch (ref.op) {
    case OpType::kAllgather:
      for (const Request* r : by_rank) response.sizes.push_back(r->shape.empty() ? 1 : r->shape[0]);
      break;
    case OpType::kAlltoall:
      for (const Request* r : by_rank) {
        for (int j = 0; j < size; ++j) {
          response.sizes.push_back(r->splits.empty() ? r->shape[0] / size : r->splits[j]);
        }
      }
      break;
    case OpType::kBarrier:
      break;
    default:
      response.sizes = {Elements(ref.shape)};
      break;
  }
  if (ref.op == OpType::kAllgather || ref.op == OpType::kAlltoall) {
    const std::string problem = ResultSizeProblem(response, size);
    if (!problem.empty()) return ErrorResponse(ref.name, problem);
  }
  return response;
}

Response FailedChangeResponse(const std::string& message) {
  Response response;
  response.type = ResponseType::kProcessSetChange;
  response.error_message = message;
  return response;
}

Response BuildChangeResponse(const std::vector<const Request*>& by_rank) {
  int ref_rank = 0;
  while (by_rank[ref_rank] == nullptr) ++ref_rank;
  const Request& ref = *by_rank[ref_rank];
  // The wire accepted only well-formed proposals.
  const std::string call = DescribeChange(DecodeChange(ref.change));
  if (std::find(by_rank.begin(), by_rank.end(), nullptr) != by_rank.end()) {
    return FailedChangeResponse(JoinError(call, by_rank));
  }
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r]->change == ref.change) continue;
    return FailedChangeResponse(
        "process sets must be changed by every rank alike, in the same order: rank " +
        std::to_string(ref_rank) + " called " + call + " but rank " + std::to_string(r) +
        " called " + DescribeChange(DecodeChange(by_rank[r]->change)));
  }
  Response response;
  response.type = ResponseType::kProcessSetChange;
  response.change = ref.change;
  return response;
}

}  // namespace lockstep
