#include "negotiation/response_cache.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>

namespace lockstep {

namespace {

// Bitwise, matching Request/Response equality: a NaN scale still hits its own entry
// instead of missing (and being evicted) every cycle.
bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

bool IsCacheable(ResponseType type) {
  switch (type) {
    case ResponseType::kAllreduce:
    case ResponseType::kAllgather:
    case ResponseType::kBroadcast:
    case ResponseType::kAlltoall:
    case ResponseType::kReducescatter:
      return true;
    default:
      return false;
  }
}

// OpType and ResponseType share their values for the cacheable kinds.
bool TypesCorrespond(OpType op, ResponseType type) {
  return IsCacheable(type) && static_cast<uint8_t>(op) == static_cast<uint8_t>(type);
}

bool SameTrailingDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return !a.empty() && a.size() == b.size() && std::equal(a.begin() + 1, a.end(), b.begin() + 1);
}

bool ReductionMatches(const Request& request, const Response& response) {
  return request.reduce_op == response.reduce_op && SameBits(request.prescale, response.prescale) &&
         SameBits(request.postscale, response.postscale) && request.shape == response.shape;
}

bool AllgatherMatches(const Request& request, const Response& response, int rank, int size) {
  return SameTrailingDims(request.shape, response.shape) &&
         response.sizes.size() == static_cast<size_t>(size) &&
         request.shape[0] == response.sizes[rank];
}

// The rows this rank sends to each rank; empty when an equal split is impossible.
std::vector<int64_t> EffectiveSplits(const Request& request, int size) {
  if (!request.splits.empty()) return request.splits;
  int64_t rows = request.shape[0];
  if (rows % size != 0) return {};
  return std::vector<int64_t>(static_cast<size_t>(size), rows / size);
}

bool AlltoallMatches(const Request& request, const Response& response, int rank, int size) {
  if (!SameTrailingDims(request.shape, response.shape)) return false;
  if (response.sizes.size() != static_cast<size_t>(size) * static_cast<size_t>(size)) {
    return false;
  }
  std::vector<int64_t> splits = EffectiveSplits(request, size);
  if (splits.size() != static_cast<size_t>(size)) return false;
  auto row = response.sizes.begin() + static_cast<std::ptrdiff_t>(rank) * size;
  return std::equal(splits.begin(), splits.end(), row);
}

}  // namespace

bool RequestMatchesResponse(const Request& request, const Response& response, int rank, int size) {
  if (rank < 0 || size <= 0 || rank >= size) return false;
  if (!TypesCorrespond(request.op, response.type)) return false;
  if (response.names.size() != 1 || response.names[0] != request.name) return false;
  if (request.dtype != response.dtype || request.device != response.device) return false;
  switch (response.type) {
    case ResponseType::kAllreduce:
    case ResponseType::kReducescatter:
      return ReductionMatches(request, response);
    case ResponseType::kBroadcast:
      return request.root_rank == response.root_rank && request.shape == response.shape;
    case ResponseType::kAllgather:
      return AllgatherMatches(request, response, rank, size);
    case ResponseType::kAlltoall:
      return AlltoallMatches(request, response, rank, size);
    default:
      return false;
  }
}

ResponseCache::ResponseCache(int capacity) : capacity_(capacity) {
  if (capacity < 0) throw std::invalid_argument("response cache capacity must be >= 0");
}

ResponseCache::Lookup ResponseCache::Find(const Request& request, int rank, int size,
                                          int32_t* id) const {
  int32_t slot = IdOf(request.name);
  if (slot < 0) return Lookup::kAbsent;
  if (id != nullptr) *id = slot;
  return RequestMatchesResponse(request, *slots_[slot], rank, size) ? Lookup::kHit
                                                                    : Lookup::kMismatch;
}

std::vector<int32_t> ResponseCache::Put(const Response& response) {
  if (response.names.size() != 1) {
    throw std::invalid_argument("response cache stores single-name responses only, got " +
                                std::to_string(response.names.size()) + " names");
  }
  if (!IsCacheable(response.type)) {
    throw std::invalid_argument("response cache cannot store barrier, control or error responses");
  }
  std::vector<int32_t> evicted;
  if (!enabled()) return evicted;
  int32_t id = IdOf(response.names[0]);
  if (id >= 0) {
    slots_[id] = response;
    MarkMostRecent(id);
    return evicted;
  }
  while (size() >= capacity_) evicted.push_back(EvictLeastRecent());
  id = TakeLowestFreeSlot();
  slots_[id] = response;
  ids_by_name_.emplace(response.names[0], id);
  recency_pos_[id] = recency_.insert(recency_.end(), id);
  return evicted;
}

const Response& ResponseCache::Get(int32_t id) const {
  if (!Contains(id)) {
    throw std::out_of_range("response cache slot " + std::to_string(id) + " is empty");
  }
  return *slots_[id];
}

bool ResponseCache::Contains(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(slots_.size()) && slots_[id].has_value();
}

void ResponseCache::Touch(int32_t id) {
  if (!Contains(id)) {
    throw std::out_of_range("response cache slot " + std::to_string(id) + " is empty");
  }
  MarkMostRecent(id);
}

void ResponseCache::Erase(int32_t id) {
  // Tolerated so a duplicate id in an eviction list cannot desynchronise ranks.
  if (!Contains(id)) return;
  ids_by_name_.erase(slots_[id]->names[0]);
  recency_.erase(recency_pos_[id]);
  slots_[id].reset();
  free_slots_.insert(id);
}

int32_t ResponseCache::IdOf(const std::string& name) const {
  auto it = ids_by_name_.find(name);
  return it == ids_by_name_.end() ? -1 : it->second;
}

int32_t ResponseCache::TakeLowestFreeSlot() {
  if (free_slots_.empty()) {
    slots_.emplace_back();
    recency_pos_.emplace_back();
    return static_cast<int32_t>(slots_.size()) - 1;
  }
  int32_t id = *free_slots_.begin();
  free_slots_.erase(free_slots_.begin());
  return id;
}

void ResponseCache::MarkMostRecent(int32_t id) {
  // splice keeps the stored iterator valid, so no lookup is needed.
  recency_.splice(recency_.end(), recency_, recency_pos_[id]);
}

int32_t ResponseCache::EvictLeastRecent() {
  int32_t id = recency_.front();
  Erase(id);
  return id;
}

}  // namespace lockstep
