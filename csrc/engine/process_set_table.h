// Which process sets exist and who is in them: pure bookkeeping, shared between user
// threads (membership checks at enqueue) and the background thread (the only writer),
// which applies the changes every rank agreed on (wire/process_set_change.h) in the
// same order on every rank.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/values.h"
#include "wire/process_set_change.h"

namespace lockstep {

// Sorted copy of `ranks`; throws Error(kInvalidArgument) for an empty list, duplicates
// or ranks outside [0, world_size).
std::vector<int> NormalizeRanks(std::vector<int> ranks, int world_size);

// The set with a rank's position in it: what ops on the set validate against.
Topology SetTopology(const std::vector<int>& ranks, int global_rank);

class ProcessSetTable {
 public:
  explicit ProcessSetTable(int world_size);

  // Ids count up from 1 and are never reused, so every rank that applies the same
  // changes in the same order assigns the same ids. Throws Error(kInvalidArgument) if
  // an identical set exists.
  int32_t Add(const std::vector<int>& ranks);
  // Throws Error(kInvalidArgument) for the global set or an unknown id.
  void Remove(int32_t id);
  // Global ranks of set `id`; nullopt if it does not exist (never added or removed).
  std::optional<std::vector<int>> Ranks(int32_t id) const;
  std::vector<int32_t> Ids() const;
  // Throws Error(kInvalidArgument) unless set `id` exists.
  std::vector<int> RanksOrThrow(int32_t id) const;

 private:
  mutable std::mutex mutex_;
  std::map<int32_t, std::vector<int>> sets_;
  int32_t next_id_ = 1;
};

}  // namespace lockstep
