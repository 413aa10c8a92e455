// The payload of a process-set change message: what one rank proposes (add a set of
// ranks, or remove a set by id), encoded as int32 words that a Request and a Response
// of type kProcessSetChange carry. Here, below negotiation, so that the coordinator
// can compare proposals and name them in its errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

struct ProcessSetChange {
  enum class Kind : int32_t { kAdd = 1, kRemove = 2 };
  Kind kind = Kind::kAdd;
  std::vector<int> ranks;  // kAdd: global ranks, sorted, unique
  int32_t id = 0;          // kRemove: the set to remove

  bool operator==(const ProcessSetChange& other) const;
};

// [kind, id, count, ranks...].
std::vector<int32_t> EncodeChange(const ProcessSetChange& change);
// Throws WireError unless `words` is a well-formed encoding: a known kind, a count
// that matches, kAdd with id 0 and at least one rank, ascending and non-negative,
// kRemove with a positive id and no ranks.
ProcessSetChange DecodeChange(const std::vector<int32_t>& words);

// The call that proposed it, as the user wrote it: "add_process_set([0, 2])".
std::string DescribeChange(const ProcessSetChange& change);
// "[0, 2]".
std::string DescribeRanks(const std::vector<int>& ranks);

}  // namespace lockstep
