// Rank 0's side of process-set changes. Each rank's proposals wait in the order its
// callers made them; once every rank has one waiting, the oldest of each are matched
// and become one kProcessSetChange response: the change, or an error every rank gets.
// Proposals have no name to be matched by, so no tensor can ever be taken for one.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "negotiation/stall_inspector.h"
#include "wire/message.h"

namespace lockstep {

class ChangeProposals {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ChangeProposals(int size);

  // `request` is a kProcessSetChange from a rank in [0, size).
  void Add(const Request& request, Clock::time_point now);
  // One response per turn of proposals that every rank has made, in turn order. A rank
  // that has joined cannot propose; its absence fails the change instead.
  void EmitReady(const std::vector<bool>& joined, Clock::time_point now, ResponseList* out);
  // The oldest turn still missing some rank's proposal, for the stall inspector.
  std::optional<WaitingTensor> Waiting(const std::vector<bool>& joined,
                                       Clock::time_point now) const;
  // Fails that turn on the ranks that proposed it (the stall shutdown time passed).
  void CancelOldest(const WaitingTensor& stalled, Clock::time_point now, ResponseList* out);
  double OldestWaitSeconds(Clock::time_point now) const;

 private:
  bool AnyWaiting() const;
  void PopOldest(Clock::time_point now);

  std::vector<std::deque<Request>> by_rank_;
  Clock::time_point oldest_since_{};  // when the oldest turn's first proposal arrived
};

}  // namespace lockstep
