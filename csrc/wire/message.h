// Requests (what a rank has ready) and responses (what all ranks will run), and
// their wire encoding. Built on the bounds-checked serializer in wire.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/types.h"

namespace lockstep {

// One tensor a rank submitted, as sent to the coordinator.
struct Request {
  int32_t rank = 0;
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kAverage;
  int32_t root_rank = 0;
  int32_t device = -1;
  double prescale = 1.0;
  double postscale = 1.0;
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall only
  // Grouped ops: every member carries the group's id (unique per rank in flight, the
  // same on every rank) and its size; 0 means not grouped.
  int64_t group_id = 0;
  int32_t group_size = 0;
  // kProcessSetChange only (empty otherwise): the proposal, as EncodeChange's words.
  std::vector<int32_t> change;

  bool operator==(const Request& other) const;
};

// Everything one rank sends in a full negotiation round.
struct RequestList {
  std::vector<Request> requests;
  // Cache slots this rank has pending on the bit-vector path (so the coordinator can
  // name the ranks that are missing when a cached tensor stalls).
  std::vector<int32_t> pending_cache_ids;
  bool operator==(const RequestList& other) const;
};

// The values of the kinds a request can ask for equal their OpType's.
enum class ResponseType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  kProcessSetChange = 7,
  kError = 8,
};

// Join and process-set changes are control messages, not tensors: negotiated, matched
// and completed by their type, never by name (a tensor may take any name), and never
// cached.
bool IsControl(OpType op);
bool IsControl(ResponseType type);

// One collective that every rank will run, in the same order. After fusion a single
// allreduce response may carry several tensor names.
struct Response {
  ResponseType type = ResponseType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kAverage;
  int32_t root_rank = 0;
  int32_t device = -1;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<std::string> names;
  // Allreduce/reducescatter/broadcast: element count of each named tensor.
  // Allgather: first-dimension size of each rank (size entries per name).
  // Alltoall: the size x size split matrix, row = sender, in rows of dim 0.
  std::vector<int64_t> sizes;
  // Shape of the (first) tensor as agreed, so joined ranks and the cache know it.
  std::vector<int64_t> shape;
  // kError; a kProcessSetChange that fails on every rank (the ranks disagree, a rank
  // has joined, or it stalled) carries its error here instead of a change.
  std::string error_message;
  int32_t last_joined_rank = -1;  // kJoin only
  int64_t group_id = 0;
  // kProcessSetChange only: the change every rank applies, as EncodeChange's words.
  std::vector<int32_t> change;

  bool operator==(const Response& other) const;
};

// What the coordinator broadcasts after a full negotiation round.
struct ResponseList {
  std::vector<Response> responses;
  // Cache slots every rank must drop (a rank sent a full request for a cached name).
  std::vector<int32_t> evict_cache_ids;
  bool operator==(const ResponseList& other) const;
};

// Encoding: a versioned header then the fields. Parse* throw WireError (from
// wire.h) on truncated, oversized or otherwise malformed input (a change that does
// not decode, or one on a message of another type, included); they never read
// outside the given bytes.
std::vector<uint8_t> SerializeRequestList(const RequestList& list);
RequestList ParseRequestList(const uint8_t* data, size_t size);
std::vector<uint8_t> SerializeResponseList(const ResponseList& list);
ResponseList ParseResponseList(const uint8_t* data, size_t size);

}  // namespace lockstep
