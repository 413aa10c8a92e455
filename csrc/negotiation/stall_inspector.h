// Detects tensors that some ranks submitted and others have not: warns (rank 0, at
// most once per interval) naming the tensors and the missing ranks, and, when a
// shutdown time is set, tells the coordinator which ops to fail instead of hanging.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/logging.h"

namespace lockstep {

struct WaitingTensor {
  std::string name;
  std::vector<int> missing_ranks;
  double waited_seconds = 0;
  // A process-set change, not a tensor: `name` describes the call, and the change is
  // failed by its type, never by a name some tensor could have.
  bool process_set_change = false;
};

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;
  StallInspector(const Config& config, const Logger& logger);

  // Whether rank 0 should force a full negotiation round so the coordinator learns
  // which ranks are missing, given how long the oldest waiting tensor has waited.
  bool Due(double oldest_wait_seconds, Clock::time_point now);
  // Warns about stalled tensors and returns those whose ops must now fail.
  std::vector<WaitingTensor> Inspect(const std::vector<WaitingTensor>& waiting,
                                     Clock::time_point now);
  // Appended to warnings, e.g. which process set the tensors and ranks belong to.
  void set_scope(std::string scope) { scope_ = std::move(scope); }

 private:
  bool warn_enabled_;
  double check_seconds_;
  double shutdown_seconds_;
  double threshold_seconds_;  // the earlier of the two that are enabled; 0 if neither
  const Logger& logger_;
  Clock::time_point last_due_{};
  Clock::time_point last_warning_{};
  bool warned_ = false;
  std::string scope_;
};

}  // namespace lockstep
