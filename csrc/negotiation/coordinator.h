// Rank 0's side of negotiation: collects every rank's full requests by name, decides
// which tensors are ready on all ranks (joined ranks count as ready), validates them
// into responses, and asks the stall inspector about the rest. Control messages are
// kept apart from the tensors, by type: join here, process-set changes in
// ChangeProposals.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "negotiation/change_proposals.h"
#include "negotiation/response_cache.h"
#include "negotiation/stall_inspector.h"
#include "wire/message.h"

namespace lockstep {

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;
  Coordinator(int size, StallInspector& stall_inspector);

  // lists[r] is rank r's RequestList for this round. `partial_since` holds, per cache
  // slot pending on some ranks only, when that was first seen.
  ResponseList Process(const std::vector<RequestList>& lists, const ResponseCache& cache,
                       const std::map<int32_t, Clock::time_point>& partial_since,
                       Clock::time_point now);
  // How long the oldest tensor waiting here has waited (0 if none).
  double OldestWaitSeconds(Clock::time_point now) const;

 private:
  struct Pending {
    std::vector<std::optional<Request>> by_rank;
    Clock::time_point first_seen;
  };

  void Add(const Request& request, const ResponseCache& cache, Clock::time_point now,
           ResponseList* out);
  bool Ready(const Pending& pending) const;
  void EmitReady(ResponseList* out);
  void Emit(const std::string& name, ResponseList* out);
  void EmitJoinIfComplete(ResponseList* out);
  void InspectStalls(const std::vector<RequestList>& lists, const ResponseCache& cache,
                     const std::map<int32_t, Clock::time_point>& partial_since,
                     Clock::time_point now, ResponseList* out);

  int size_;
  StallInspector& stall_inspector_;
  std::unordered_map<std::string, Pending> table_;
  std::vector<std::string> arrival_order_;  // responses follow first arrival
  ChangeProposals changes_;
  std::vector<bool> joined_;
  int joined_count_ = 0;
  int last_joined_ = -1;
};

}  // namespace lockstep
