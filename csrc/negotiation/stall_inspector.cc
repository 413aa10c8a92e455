#include "negotiation/stall_inspector.h"

#include <algorithm>
#include <sstream>

namespace lockstep {
namespace {

double Seconds(StallInspector::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

StallInspector::StallInspector(const Config& config, const Logger& logger)
    : warn_enabled_(!config.stall_check_disabled && config.stall_check_seconds > 0),
      check_seconds_(config.stall_check_seconds),
      shutdown_seconds_(config.stall_shutdown_seconds),
      logger_(logger) {
  threshold_seconds_ = 0;
  if (warn_enabled_) threshold_seconds_ = check_seconds_;
  if (shutdown_seconds_ > 0) {
    threshold_seconds_ = threshold_seconds_ > 0 ? std::min(threshold_seconds_, shutdown_seconds_)
                                                : shutdown_seconds_;
  }
}

bool StallInspector::Due(double oldest_wait_seconds, Clock::time_point now) {
  if (threshold_seconds_ <= 0 || oldest_wait_seconds < threshold_seconds_) return false;
  // Look again at most every second (or threshold, if shorter): cheap, yet prompt
  // enough for a shutdown deadline.
  double interval = std::min(1.0, threshold_seconds_);
  if (last_due_ != Clock::time_point{} && Seconds(now - last_due_) < interval) return false;
  last_due_ = now;
  return true;
}

std::vector<WaitingTensor> StallInspector::Inspect(const std::vector<WaitingTensor>& waiting,
                                                   Clock::time_point now) {
  std::vector<WaitingTensor> to_fail;
  std::ostringstream stalled;
  int stalled_count = 0;
  for (const WaitingTensor& t : waiting) {
    if (shutdown_seconds_ > 0 && t.waited_seconds >= shutdown_seconds_) to_fail.push_back(t);
    if (!warn_enabled_ || t.waited_seconds < check_seconds_) continue;
    stalled << (stalled_count++ ? "; " : "") << "'" << t.name << "' (missing ranks:";
    for (int r : t.missing_ranks) stalled << " " << r;
    stalled << ")";
  }
  bool interval_passed = !warned_ || Seconds(now - last_warning_) >= check_seconds_;
  if (stalled_count > 0 && interval_passed) {
    std::ostringstream out;
    out << "Stall: " << stalled_count << " tensor(s) were submitted by some ranks but not by all "
        << "for at least " << check_seconds_ << " s. Ranks may be running different code paths "
        << "or one rank is stuck. Waiting: " << stalled.str() << scope_;
    if (shutdown_seconds_ > 0) {
      out << ". They will fail after " << shutdown_seconds_ << " s.";
    }
    logger_.Log(LogLevel::kWarning, out.str());
    warned_ = true;
    last_warning_ = now;
  }
  return to_fail;
}

}  // namespace lockstep
