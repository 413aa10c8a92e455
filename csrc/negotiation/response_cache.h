// The steady-state fast path: responses already negotiated once, kept in numbered
// slots so later cycles can agree on them with one bit per slot instead of a full
// gather. Every rank holds an identical cache because every rank applies the same
// calls in the same order, so every decision here is deterministic: it depends only
// on the call sequence, never on hashing order, time or addresses.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "wire/message.h"

namespace lockstep {

// True when `request`, as submitted by `rank` in a world of `size` ranks, is exactly
// what `response` describes, so running the response again serves the request.
// Ignores group_id: a cached tensor may be resubmitted in a different group.
bool RequestMatchesResponse(const Request& request, const Response& response, int rank, int size);

class ResponseCache {
 public:
  explicit ResponseCache(int capacity);  // 0 disables

  int capacity() const { return capacity_; }
  bool enabled() const { return capacity_ > 0; }

  enum class Lookup { kHit, kMismatch, kAbsent };
  // kHit: the cached response for request.name matches it (*id gets the slot).
  // kMismatch: the name is cached with different parameters (*id gets the slot, so
  // the caller can have it evicted). kAbsent: not cached (*id untouched).
  Lookup Find(const Request& request, int rank, int size, int32_t* id) const;

  // Stores a single-name allreduce, allgather, broadcast, alltoall or reducescatter
  // response (others throw std::invalid_argument) as the most recently used entry, in
  // the lowest free slot, or in place if its name is already cached. Returns the slots
  // evicted to make room, least recently used first; callers treat them as Erase()d.
  // A disabled cache stores nothing.
  std::vector<int32_t> Put(const Response& response);

  const Response& Get(int32_t id) const;  // throws std::out_of_range for an empty slot
  bool Contains(int32_t id) const;
  void Touch(int32_t id);  // marks most recently used; throws for an empty slot
  void Erase(int32_t id);  // no-op for an empty slot
  int32_t IdOf(const std::string& name) const;  // -1 if absent
  int size() const { return static_cast<int>(ids_by_name_.size()); }

 private:
  // Reuses the lowest freed slot, else grows slots_ by one.
  int32_t TakeLowestFreeSlot();
  void MarkMostRecent(int32_t id);  // `id` must be occupied
  int32_t EvictLeastRecent();

  int capacity_;
  // Grows on demand up to capacity_; an empty optional is a free slot.
  std::vector<std::optional<Response>> slots_;
  std::set<int32_t> free_slots_;  // free ids below slots_.size(), ordered
  std::map<std::string, int32_t> ids_by_name_;
  std::list<int32_t> recency_;                             // least recently used first
  std::vector<std::list<int32_t>::iterator> recency_pos_;  // valid for occupied slots
};

}  // namespace lockstep
