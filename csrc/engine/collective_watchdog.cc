#include "engine/collective_watchdog.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
  // A few looks a second cost nothing measurable, and keep the answers to rank 0's
  // pings well inside the time it waits for them.
  const auto period =
      std::chrono::milliseconds(static_cast<int64_t>(std::min(250.0, limit_seconds_ * 250)));
  double previous_busy = 0;
  bool looked_early = false;
  for (;;) {
    {  // not held while asking: shutdown need not wait for rank 0's pings
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, period, [this] { return stopping_; })) return;
    }
    const double busy = clock_.BusySeconds();
    if (busy < previous_busy) looked_early = false;  // another call (or none: busy 0)
    previous_busy = busy;
    if (busy <= 0) continue;
    // A process set's collective leaves the ranks outside the set idle: rank 0 may not
    // even be waiting. Only a job-wide call is asked about.
    const bool ask_who = finder_ && clock_.CallInvolvesEveryRank();
    if (ask_who && busy < limit_seconds_) {
      if (job_.rank() != 0) {
        AnswerRoot(busy);
      } else if (!looked_early && peer_timeout_seconds_ > 0 && busy >= peer_timeout_seconds_) {
        looked_early = true;
        LookEarly(busy);
      }
      continue;
    }
    if (busy < limit_seconds_) continue;
    const int rank = job_.rank();
    std::vector<int> silent;
    if (ask_who) {
      // Every rank's watchdog fires within about a second of the others' (they entered
      // the collective together): the others listen for longer than rank 0 asks, so
      // that rank 0's verdict reaches them.
      const double ask = PeerGraceSeconds(peer_timeout_seconds_) / 2;
      silent = finder_->FindSilentRanks(rank == 0 ? ask : 3 * ask + 2);
    }
    End(busy, ask_who, silent);
  }
}

void CollectiveWatchdog::AnswerRoot(double busy) {
  // Inside a call that has lasted this long, rank 0 may be asking who is there (from
  // negotiation, or from its own watchdog): answer, and end with its verdict.
  if (busy < std::min(1.0, limit_seconds_ / 4)) return;
  const std::vector<int> silent = finder_->AnswerRoot();
  if (!silent.empty()) End(busy, /*asked=*/true, silent);
}

void CollectiveWatchdog::LookEarly(double busy) {
  // Rank 0 asks at the peer timeout, as negotiation does, before ranks waiting for it
  // in negotiation (which wait longer) would blame rank 0 itself. A silent rank ends
  // the job now; when all answer, the call may just be slow: it keeps its full limit,
  // and the ranks that negotiate wait on.
  const std::vector<int> silent =
      finder_->FindSilentRanks(PeerGraceSeconds(peer_timeout_seconds_) / 2);
  if (!silent.empty()) End(busy, /*asked=*/true, silent);
  finder_->ShareVerdict({});
}

void CollectiveWatchdog::End(double busy, bool asked, const std::vector<int>& silent) {
  const int rank = job_.rank();
  std::ostringstream message;
  message << "a collective has waited " << static_cast<int>(busy)
          << " s for other ranks (LOCKSTEP_PEER_TIMEOUT_SECONDS is " << peer_timeout_seconds_
          << " s): " << WhoIsSilent(asked, silent, rank) << ". Ending the job with MPI_Abort.";
  logger_.Log(LogLevel::kError, message.str());
  std::fflush(stderr);
  // Only now: a rank that hears the verdict aborts at once, which may end this
  // process before it could say whom it found.
  if (asked && rank == 0) finder_->ShareVerdict(silent);
  job_.Abort();
  std::abort();  // not reached: GCC does not carry [[noreturn]] through a virtual call
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
