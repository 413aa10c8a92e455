#include "engine/collective_watchdog.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "negotiation/peer_deadline.h"

namespace lockstep {

CollectiveWatchdog::CollectiveWatchdog(const CallClock& clock, Communicator& job,
                                       std::unique_ptr<SilenceFinder> finder,
                                       std::vector<std::string> hostnames, double limit_seconds,
                                       double peer_timeout_seconds, const Logger& logger)
    : clock_(clock),
      job_(job),
      finder_(std::move(finder)),
      hostnames_(std::move(hostnames)),
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
    const int rank = job_.rank();
    std::vector<int> silent;
    // A process set's collective leaves the ranks outside the set idle: they would not
    // answer, and rank 0 may not even be waiting. Only a job-wide call is asked about.
    const bool ask_who = finder_ && clock_.CallInvolvesEveryRank();
    if (ask_who) {
      // Every rank's watchdog fires within about a second of the others' (they entered
      // the collective together): the others listen for longer than rank 0 asks, so
      // that rank 0's verdict reaches them.
      const double ask = PeerGraceSeconds(peer_timeout_seconds_) / 2;
      silent = finder_->FindSilentRanks(rank == 0 ? ask : 3 * ask + 2);
    }
    std::ostringstream message;
    message << "a collective has waited " << static_cast<int>(busy)
            << " s for other ranks (LOCKSTEP_PEER_TIMEOUT_SECONDS is " << peer_timeout_seconds_
            << " s): " << WhoIsSilent(ask_who, silent, rank) << ". Ending the job with MPI_Abort.";
    logger_.Log(LogLevel::kError, message.str());
    std::fflush(stderr);
    // Only now: a rank that hears the verdict aborts at once, which may end this
    // process before it could say whom it found.
    if (ask_who && rank == 0) finder_->ShareVerdict(silent);
    job_.Abort();
  }
}

std::string CollectiveWatchdog::WhoIsSilent(bool asked, const std::vector<int>& silent,
                                            int rank) const {
  const std::string lost = "frozen, overloaded or cut off from the network in the middle of it";
  if (!asked) return "some rank is " + lost;
  if (silent.empty()) return "every rank answered rank 0, so some rank is stuck inside it";
  std::string who = DescribeRanksOnHosts(silent, hostnames_) + " did not respond";
  if (rank != 0) {
    who += silent == std::vector<int>{0} ? " (rank 0 coordinates)" : ", as rank 0 found";
  }
  return who + ": " + lost;
}

}  // namespace lockstep
