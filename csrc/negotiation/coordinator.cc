#include "negotiation/coordinator.h"

#include <algorithm>

#include "negotiation/response_builder.h"

namespace lockstep {

Coordinator::Coordinator(int size, StallInspector& stall_inspector)
    : size_(size), stall_inspector_(stall_inspector), changes_(size), joined_(size, false) {}

ResponseList Coordinator::Process(const std::vector<RequestList>& lists, const ResponseCache& cache,
                                  const std::map<int32_t, Clock::time_point>& partial_since,
                                  Clock::time_point now) {
  ResponseList out;
  for (const RequestList& list : lists) {
    for (const Request& request : list.requests) Add(request, cache, now, &out);
  }
  for (auto& [name, pending] : table_) {
    if (pending.first_seen == Clock::time_point{}) pending.first_seen = now;
  }
  EmitReady(&out);
  changes_.EmitReady(joined_, now, &out);  // before a completed join clears joined_
  EmitJoinIfComplete(&out);
  InspectStalls(lists, cache, partial_since, now, &out);
  return out;
}

void Coordinator::Add(const Request& request, const ResponseCache& cache, Clock::time_point now,
                      ResponseList* out) {
  if (request.rank < 0 || request.rank >= size_) return;
  if (request.op == OpType::kJoin) {
    if (!joined_[request.rank]) ++joined_count_;
    joined_[request.rank] = true;
    last_joined_ = request.rank;
    return;
  }
  if (request.op == OpType::kProcessSetChange) {
    changes_.Add(request, now);
    return;
  }
  // A full request for a cached name means that rank's parameters differ from the
  // cached ones (or it was converted): every rank drops the slot and resends in full.
  int32_t cached = cache.IdOf(request.name);
  if (cached >= 0 && std::find(out->evict_cache_ids.begin(), out->evict_cache_ids.end(), cached) ==
                         out->evict_cache_ids.end()) {
    out->evict_cache_ids.push_back(cached);
  }
  auto [it, inserted] = table_.try_emplace(request.name);
  if (inserted) {
    it->second.by_rank.resize(size_);
    arrival_order_.push_back(request.name);
  }
  it->second.by_rank[request.rank] = request;
}

bool Coordinator::Ready(const Pending& pending) const {
  for (int r = 0; r < size_; ++r) {
    if (!pending.by_rank[r].has_value() && !joined_[r]) return false;
  }
  return true;
}

void Coordinator::EmitReady(ResponseList* out) {
  // A group is released only when every member is ready everywhere.
  std::map<int64_t, int> ready_members;
  for (const std::string& name : arrival_order_) {
    const Pending& pending = table_.at(name);
    if (!Ready(pending)) continue;
    for (const auto& request : pending.by_rank) {
      if (request && request->group_id != 0) {
        ++ready_members[request->group_id];
        break;
      }
    }
  }
  std::vector<std::string> emitted;
  for (const std::string& name : arrival_order_) {
    const Pending& pending = table_.at(name);
    if (!Ready(pending)) continue;
    const Request* any = nullptr;
    for (const auto& request : pending.by_rank) {
      if (request) any = &*request;
      if (any) break;
    }
    if (any->group_id != 0 && ready_members[any->group_id] < any->group_size) continue;
    Emit(name, out);
    emitted.push_back(name);
  }
  for (const std::string& name : emitted) table_.erase(name);
  arrival_order_.erase(std::remove_if(arrival_order_.begin(), arrival_order_.end(),
                                      [&](const std::string& n) { return !table_.count(n); }),
                       arrival_order_.end());
}

void Coordinator::Emit(const std::string& name, ResponseList* out) {
  const Pending& pending = table_.at(name);
  std::vector<const Request*> by_rank(size_, nullptr);
  for (int r = 0; r < size_; ++r) {
    if (pending.by_rank[r]) by_rank[r] = &*pending.by_rank[r];
  }
  out->responses.push_back(BuildResponse(by_rank));
}

void Coordinator::EmitJoinIfComplete(ResponseList* out) {
  if (joined_count_ < size_) return;
  Response join;
  join.type = ResponseType::kJoin;
  join.names = {"join"};
  join.last_joined_rank = last_joined_;
  out->responses.push_back(join);
  std::fill(joined_.begin(), joined_.end(), false);
  joined_count_ = 0;
  last_joined_ = -1;
}

double Coordinator::OldestWaitSeconds(Clock::time_point now) const {
  double oldest = changes_.OldestWaitSeconds(now);
  for (const auto& [name, pending] : table_) {
    oldest = std::max(oldest, std::chrono::duration<double>(now - pending.first_seen).count());
  }
  return oldest;
}

void Coordinator::InspectStalls(const std::vector<RequestList>& lists, const ResponseCache& cache,
                                const std::map<int32_t, Clock::time_point>& partial_since,
                                Clock::time_point now, ResponseList* out) {
  std::vector<WaitingTensor> waiting;
  for (const std::string& name : arrival_order_) {
    const Pending& pending = table_.at(name);
    WaitingTensor t{name, {}, std::chrono::duration<double>(now - pending.first_seen).count()};
    for (int r = 0; r < size_; ++r) {
      if (!pending.by_rank[r] && !joined_[r]) t.missing_ranks.push_back(r);
    }
    waiting.push_back(std::move(t));
  }
  for (const auto& [id, since] : partial_since) {
    if (!cache.Contains(id)) continue;
    WaitingTensor t{
        cache.Get(id).names.front(), {}, std::chrono::duration<double>(now - since).count()};
    for (int r = 0; r < size_; ++r) {
      const auto& ids = lists[r].pending_cache_ids;
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) t.missing_ranks.push_back(r);
    }
    if (!t.missing_ranks.empty()) waiting.push_back(std::move(t));
  }
  if (auto change = changes_.Waiting(joined_, now)) waiting.push_back(std::move(*change));
  for (const WaitingTensor& stalled : stall_inspector_.Inspect(waiting, now)) {
    if (stalled.process_set_change) {
      changes_.CancelOldest(stalled, now, out);
      continue;
    }
    const std::string& name = stalled.name;
    std::string missing;
    for (int r : stalled.missing_ranks) missing += " " + std::to_string(r);
    out->responses.push_back(ErrorResponse(
        name, "Collective on tensor '" + name + "' stalled: rank(s)" + missing +
                  " did not submit it within the stall shutdown time "
                  "(LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS), so it was cancelled on every rank"));
    if (table_.erase(name)) {
      arrival_order_.erase(std::find(arrival_order_.begin(), arrival_order_.end(), name));
    }
  }
}

}  // namespace lockstep
