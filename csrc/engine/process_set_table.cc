#include "engine/process_set_table.h"

#include <algorithm>

namespace lockstep {
namespace {

Error Invalid(const std::string& message) { return Error(message, Status::Code::kInvalidArgument); }

}  // namespace

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
