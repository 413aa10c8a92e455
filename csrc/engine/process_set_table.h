// Which process sets exist and who is in them: pure bookkeeping, shared between user
// threads (membership checks at enqueue) and the background thread (the only writer).
// Also the agreement logic of add/remove: every rank proposes a change, the proposals
// are allgathered over the global set, and each rank derives the same verdict.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/lockstep.h"

namespace lockstep {

struct ProcessSetChange {
  enum class Kind : int32_t { kAdd = 1, kRemove = 2 };
  Kind kind = Kind::kAdd;
  std::vector<int> ranks;  // kAdd: global ranks, sorted, unique
  int32_t id = 0;          // kRemove: the set to remove
};

// Sorted copy of `ranks`; throws Error(kInvalidArgument) for an empty list, duplicates
// or ranks outside [0, world_size).
std::vector<int> NormalizeRanks(std::vector<int> ranks, int world_size);

// A change as int32 words: [kind, id, count, ranks...], so proposals of different
// lengths can be allgathered and split again.
std::vector<int32_t> EncodeChange(const ProcessSetChange& change);
// Splits the allgathered proposals (rank order) and returns the change they agree on;
// throws Error(kPrecondition) naming the first rank that disagrees with rank 0.
ProcessSetChange AgreedChange(const int32_t* words, size_t count, int world_size);

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

std::string DescribeRanks(const std::vector<int>& ranks);

}  // namespace lockstep
