#include "negotiation/change_proposals.h"

#include "negotiation/response_builder.h"
#include "wire/process_set_change.h"

namespace lockstep {

ChangeProposals::ChangeProposals(int size) : by_rank_(size) {}

void ChangeProposals::Add(const Request& request, Clock::time_point now) {
  if (!AnyWaiting()) oldest_since_ = now;
  by_rank_[request.rank].push_back(request);
}

bool ChangeProposals::AnyWaiting() const {
  for (const auto& queue : by_rank_) {
    if (!queue.empty()) return true;
  }
  return false;
}

void ChangeProposals::PopOldest(Clock::time_point now) {
  for (auto& queue : by_rank_) {
    if (!queue.empty()) queue.pop_front();
  }
  // The next turn was queued behind this one; its wait counts from here.
  oldest_since_ = now;
}

void ChangeProposals::EmitReady(const std::vector<bool>& joined, Clock::time_point now,
                                ResponseList* out) {
  while (AnyWaiting()) {
    std::vector<const Request*> turn(by_rank_.size(), nullptr);
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      if (!by_rank_[r].empty()) {
        turn[r] = &by_rank_[r].front();
      } else if (!joined[r]) {
        return;  // this rank has yet to propose
      }
    }
    out->responses.push_back(BuildChangeResponse(turn));
    PopOldest(now);
  }
}

std::optional<WaitingTensor> ChangeProposals::Waiting(const std::vector<bool>& joined,
                                                      Clock::time_point now) const {
  if (!AnyWaiting()) return std::nullopt;
  WaitingTensor waiting;
  waiting.process_set_change = true;
  waiting.waited_seconds = std::chrono::duration<double>(now - oldest_since_).count();
  for (size_t r = 0; r < by_rank_.size(); ++r) {
    if (by_rank_[r].empty()) {
      if (!joined[r]) waiting.missing_ranks.push_back(static_cast<int>(r));
    } else if (waiting.name.empty()) {
      waiting.name = DescribeChange(DecodeChange(by_rank_[r].front().change));
    }
  }
  return waiting;
}

void ChangeProposals::CancelOldest(const WaitingTensor& stalled, Clock::time_point now,
                                   ResponseList* out) {
  std::string missing;
  for (int r : stalled.missing_ranks) missing += " " + std::to_string(r);
  out->responses.push_back(FailedChangeResponse(
      "Process set change " + stalled.name + " stalled: rank(s)" + missing +
      " did not call it within the stall shutdown time (LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS), "
      "so it was cancelled on every rank"));
  PopOldest(now);
}

double ChangeProposals::OldestWaitSeconds(Clock::time_point now) const {
  if (!AnyWaiting()) return 0;
  return std::chrono::duration<double>(now - oldest_since_).count();
}

}  // namespace lockstep
