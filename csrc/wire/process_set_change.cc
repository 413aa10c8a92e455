#include "wire/process_set_change.h"

#include "wire/wire.h"

namespace lockstep {
namespace {

constexpr size_t kHeaderWords = 3;  // kind, id, count

[[noreturn]] void Malformed(const std::string& why) {
  throw WireError("malformed process set change in wire message: " + why);
}

}  // namespace

bool ProcessSetChange::operator==(const ProcessSetChange& other) const {
  return kind == other.kind && ranks == other.ranks && id == other.id;
}

std::vector<int32_t> EncodeChange(const ProcessSetChange& change) {
  std::vector<int32_t> words = {static_cast<int32_t>(change.kind), change.id,
                                static_cast<int32_t>(change.ranks.size())};
  words.insert(words.end(), change.ranks.begin(), change.ranks.end());
  return words;
}

ProcessSetChange DecodeChange(const std::vector<int32_t>& words) {
  if (words.size() < kHeaderWords) Malformed(std::to_string(words.size()) + " words");
  const int32_t kind = words[0];
  if (kind != static_cast<int32_t>(ProcessSetChange::Kind::kAdd) &&
      kind != static_cast<int32_t>(ProcessSetChange::Kind::kRemove)) {
    Malformed("unknown kind " + std::to_string(kind));
  }
  // Compared as sizes, so a negative count cannot pass as a large one.
  if (words[2] < 0 || static_cast<size_t>(words[2]) != words.size() - kHeaderWords) {
    Malformed("count " + std::to_string(words[2]) + " for " +
              std::to_string(words.size() - kHeaderWords) + " ranks");
  }
  ProcessSetChange change;
  change.kind = static_cast<ProcessSetChange::Kind>(kind);
  change.id = words[1];
  change.ranks.assign(words.begin() + kHeaderWords, words.end());
  if (change.kind == ProcessSetChange::Kind::kRemove) {
    if (change.id <= 0 || !change.ranks.empty()) Malformed("a removal names one set by its id");
    return change;
  }
  if (change.id != 0 || change.ranks.empty()) Malformed("an addition names its ranks only");
  for (size_t i = 0; i < change.ranks.size(); ++i) {
    if (change.ranks[i] < 0 || (i > 0 && change.ranks[i] <= change.ranks[i - 1])) {
      Malformed("ranks " + DescribeRanks(change.ranks) + " are not ascending and non-negative");
    }
  }
  return change;
}

std::string DescribeChange(const ProcessSetChange& change) {
  if (change.kind == ProcessSetChange::Kind::kAdd) {
    return "add_process_set(" + DescribeRanks(change.ranks) + ")";
  }
  return "remove_process_set(" + std::to_string(change.id) + ")";
}

std::string DescribeRanks(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

}  // namespace lockstep
