#include "engine/process_set_table.h"

#include <algorithm>

namespace lockstep {
namespace {

Error Invalid(const std::string& message) { return Error(message, Status::Code::kInvalidArgument); }

std::string DescribeChange(const ProcessSetChange& change) {
  if (change.kind == ProcessSetChange::Kind::kAdd) {
    return "add_process_set(" + DescribeRanks(change.ranks) + ")";
  }
  return "remove_process_set(" + std::to_string(change.id) + ")";
}

bool SameChange(const ProcessSetChange& a, const ProcessSetChange& b) {
  return a.kind == b.kind && a.ranks == b.ranks && a.id == b.id;
}

}  // namespace

std::string DescribeRanks(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::vector<int> NormalizeRanks(std::vector<int> ranks, int world_size) {
  if (ranks.empty()) throw Invalid("a process set needs at least one rank");
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw Invalid("process set ranks " + DescribeRanks(ranks) + " contain duplicates");
  }
  if (ranks.front() < 0 || ranks.back() >= world_size) {
    throw Invalid("process set ranks " + DescribeRanks(ranks) + " must lie in [0, " +
                  std::to_string(world_size) + ")");
  }
  return ranks;
}

std::vector<int32_t> EncodeChange(const ProcessSetChange& change) {
  std::vector<int32_t> words = {static_cast<int32_t>(change.kind), change.id,
                                static_cast<int32_t>(change.ranks.size())};
  words.insert(words.end(), change.ranks.begin(), change.ranks.end());
  return words;
}

ProcessSetChange AgreedChange(const int32_t* words, size_t count, int world_size) {
  std::vector<ProcessSetChange> proposals;
  size_t at = 0;
  while (at + 3 <= count && static_cast<int>(proposals.size()) < world_size) {
    ProcessSetChange change;
    change.kind = static_cast<ProcessSetChange::Kind>(words[at]);
    change.id = words[at + 1];
    const size_t n = static_cast<size_t>(std::max(words[at + 2], 0));
    if (at + 3 + n > count) break;
    change.ranks.assign(words + at + 3, words + at + 3 + n);
    proposals.push_back(std::move(change));
    at += 3 + n;
  }
  if (static_cast<int>(proposals.size()) != world_size || at != count) {
    throw Error("internal error: malformed process set proposals");
  }
  for (int r = 1; r < world_size; ++r) {
    if (!SameChange(proposals[r], proposals[0])) {
      throw Error(
          "process sets must be changed by every rank alike, in the same order: rank 0 "
          "called " +
              DescribeChange(proposals[0]) + " but rank " + std::to_string(r) + " called " +
              DescribeChange(proposals[r]),
          Status::Code::kPrecondition);
    }
  }
  return proposals[0];
}

Topology SetTopology(const std::vector<int>& ranks, int global_rank) {
  Topology topology;
  topology.size = static_cast<int>(ranks.size());
  auto it = std::find(ranks.begin(), ranks.end(), global_rank);
  topology.rank = it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  return topology;
}

ProcessSetTable::ProcessSetTable(int world_size) {
  std::vector<int> all(world_size);
  for (int r = 0; r < world_size; ++r) all[r] = r;
  sets_.emplace(0, std::move(all));
}

int32_t ProcessSetTable::Add(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, members] : sets_) {
    if (members == ranks) {
      throw Invalid("process set " + DescribeRanks(ranks) + " already exists (id " +
                    std::to_string(id) + ")");
    }
  }
  sets_.emplace(next_id_, ranks);
  return next_id_++;
}

void ProcessSetTable::Remove(int32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id == 0) throw Invalid("the global process set (id 0) cannot be removed");
  if (sets_.erase(id) == 0) {
    throw Invalid("process set " + std::to_string(id) +
                  " does not exist (never added, or removed)");
  }
}

std::optional<std::vector<int>> ProcessSetTable::Ranks(int32_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return std::nullopt;
  return it->second;
}

std::vector<int> ProcessSetTable::RanksOrThrow(int32_t id) const {
  auto ranks = Ranks(id);
  if (!ranks) {
    throw Invalid("process set " + std::to_string(id) +
                  " does not exist (never added, or removed)");
  }
  return *ranks;
}

std::vector<int32_t> ProcessSetTable::Ids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int32_t> ids;
  for (const auto& [id, members] : sets_) ids.push_back(id);
  return ids;
}

}  // namespace lockstep
