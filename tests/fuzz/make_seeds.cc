// Writes the fuzzer's seed corpus: real encoded request and response lists of every
// message type, as the negotiation sends them.
//   lockstep_wire_seeds tests/fuzz/corpus
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "wire/message.h"
#include "wire/process_set_change.h"

namespace {

using namespace lockstep;

void Write(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

std::vector<int32_t> AddWords(std::vector<int> ranks) {
  ProcessSetChange change;
  change.ranks = std::move(ranks);
  return EncodeChange(change);
}

Request RequestFor(OpType op, int rank) {
  Request r;
  r.rank = rank;
  r.op = op;
  r.name = std::string("layer") + std::to_string(static_cast<int>(op)) + ".weight";
  r.shape = {4, 3};
  if (op == OpType::kAlltoall) r.splits = {1, 3};
  if (op == OpType::kBroadcast) r.root_rank = 1;
  if (op == OpType::kProcessSetChange) r.change = AddWords({0, 1});
  return r;
}

Response ResponseFor(ResponseType type) {
  Response r;
  r.type = type;
  r.names = {"layer.weight"};
  r.shape = {4, 3};
  r.sizes = {12};
  if (type == ResponseType::kAllgather) r.sizes = {4, 5};
  if (type == ResponseType::kAlltoall) r.sizes = {1, 3, 2, 2};
  if (type == ResponseType::kError) r.error_message = "Mismatched shapes for allreduce";
  if (type == ResponseType::kJoin) r.last_joined_rank = 1;
  if (type == ResponseType::kProcessSetChange) {
    r.names.clear();
    r.change = AddWords({0, 1});
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  Write(dir, "request_list_empty", SerializeRequestList(RequestList{}));
  Write(dir, "response_list_empty", SerializeResponseList(ResponseList{}));
  RequestList all_ops;
  for (int op = 0; op <= static_cast<int>(OpType::kProcessSetChange); ++op) {
    RequestList one;
    one.requests = {RequestFor(static_cast<OpType>(op), 1)};
    Write(dir, "request_op" + std::to_string(op), SerializeRequestList(one));
    all_ops.requests.push_back(one.requests[0]);
  }
  Request grouped = RequestFor(OpType::kAllreduce, 0);
  grouped.dtype = DataType::kBFloat16;
  grouped.reduce_op = ReduceOp::kSum;
  grouped.prescale = 0.5;
  grouped.group_id = 12345;
  grouped.group_size = 2;
  all_ops.requests.push_back(grouped);
  all_ops.pending_cache_ids = {0, 7, 63, 64};
  Write(dir, "request_list_mixed", SerializeRequestList(all_ops));

  ResponseList all_types;
  for (int type = 0; type <= static_cast<int>(ResponseType::kError); ++type) {
    ResponseList one;
    one.responses = {ResponseFor(static_cast<ResponseType>(type))};
    Write(dir, "response_type" + std::to_string(type), SerializeResponseList(one));
    all_types.responses.push_back(one.responses[0]);
  }
  Response fused = ResponseFor(ResponseType::kAllreduce);
  fused.names = {"a", "b", "c"};
  fused.sizes = {1, 2, 3};
  fused.group_id = 99;
  all_types.responses.push_back(fused);
  all_types.evict_cache_ids = {3, 1023};
  Write(dir, "response_list_mixed", SerializeResponseList(all_types));
  ResponseList failed_change;
  failed_change.responses = {ResponseFor(ResponseType::kProcessSetChange)};
  failed_change.responses[0].change.clear();
  failed_change.responses[0].error_message = "process sets must be changed by every rank alike";
  Write(dir, "response_failed_change", SerializeResponseList(failed_change));
  return 0;
}
