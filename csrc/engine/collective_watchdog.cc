#include "engine/collective_watchdog.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sstream>

namespace lockstep {

CollectiveWatchdog::CollectiveWatchdog(const CallClock& clock, Communicator& job,
                                       double limit_seconds, double peer_timeout_seconds,
                                       const Logger& logger)
    : clock_(clock),
      job_(job),
      limit_seconds_(limit_seconds),
      peer_timeout_seconds_(peer_timeout_seconds),
      logger_(logger) {
  if (limit_seconds_ > 0) thread_ = std::thread([this] { Watch(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::Watch() {
  prctl(PR_SET_NAME, "lockstep-watch");
  // Checking once a second costs nothing measurable and is precise enough here.
  const auto period =
      std::chrono::milliseconds(static_cast<int64_t>(std::min(1000.0, limit_seconds_ * 250)));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const double busy = clock_.BusySeconds();
    if (busy < limit_seconds_) continue;
    std::ostringstream message;
    message << "a collective has waited " << static_cast<int>(busy)
            << " s for other ranks (LOCKSTEP_PEER_TIMEOUT_SECONDS is " << peer_timeout_seconds_
            << " s): some rank is frozen, overloaded or cut off from the network in the middle "
               "of it. Ending the job with MPI_Abort.";
    logger_.Log(LogLevel::kError, message.str());
    std::fflush(stderr);
    job_.Abort();
  }
}

}  // namespace lockstep
