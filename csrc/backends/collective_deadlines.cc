#include "backends/collective_deadlines.h"

#include <algorithm>
#include <sstream>

#include "common/tensor_list.h"

namespace lockstep {

uint64_t CollectiveDeadlines::Add(std::vector<std::string> names) {
  Entry entry;
  entry.id = next_id_++;
  entry.names = std::move(names);
  entries_.push_back(std::move(entry));
  return entries_.back().id;
}

void CollectiveDeadlines::Started(uint64_t id, Clock::time_point at) {
  for (Entry& entry : entries_) {
    if (entry.id != id || entry.started) continue;
    entry.started = true;
    entry.started_at = at;
  }
}

void CollectiveDeadlines::Finished(uint64_t id) {
  // Stream order: a finished collective means every earlier one finished too.
  auto last = std::find_if(entries_.begin(), entries_.end(),
                           [id](const Entry& entry) { return entry.id == id; });
  if (last != entries_.end()) entries_.erase(entries_.begin(), std::next(last));
}

std::string CollectiveDeadlines::Expired(Clock::time_point now) const {
  if (timeout_seconds_ <= 0) return "";
  for (const Entry& entry : entries_) {
    if (!entry.started) continue;
    const double running = std::chrono::duration<double>(now - entry.started_at).count();
    if (running <= timeout_seconds_) continue;
    std::ostringstream text;
    text << "the GPU collective on tensor(s) " << TensorList(entry.names)
         << " did not finish within " << timeout_seconds_
         << " s of starting (LOCKSTEP_NCCL_TIMEOUT_SECONDS): a peer may have died or hung";
    return text.str();
  }
  return "";
}

std::vector<std::string> CollectiveDeadlines::PendingNames() const {
  std::vector<std::string> names;
  for (const Entry& entry : entries_)
    names.insert(names.end(), entry.names.begin(), entry.names.end());
  return names;
}

}  // namespace lockstep
