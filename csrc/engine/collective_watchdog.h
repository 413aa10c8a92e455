// Ends the job when one blocking collective has waited far too long. Negotiation is
// bounded and names unresponsive ranks itself (backends/mpi/mpi_exchange); but a rank
// that freezes or is cut off in the middle of a data collective leaves its peers
// inside a blocking MPI call that never returns and cannot be interrupted. This
// thread notices, asks which ranks are silent (rank 0 pings them all, on a
// communicator of its own), says so, and calls MPI_Abort, which ends every rank the
// launcher can reach, instead of leaving the job hanging. The names let an elastic
// launcher leave the lost host out of the next job. Rank 0 first asks at the peer
// timeout, as negotiation does, and ends the job at once if a rank is silent; the
// others answer such pings while they wait inside a call, so that ranks busy in a
// data collective and ranks waiting in negotiation are never taken for lost ones.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/call_clock.h"
#include "backends/communicator.h"
#include "common/logging.h"

namespace lockstep {

class CollectiveWatchdog {
 public:
  // limit_seconds 0: never. `job`: all ranks, aborted when the limit passes; `finder`
  // (may be null: then no names) over the same ranks; `hostnames[r]`: rank r's host.
  CollectiveWatchdog(const CallClock& clock, Communicator& job,
                     std::unique_ptr<SilenceFinder> finder, std::vector<std::string> hostnames,
                     double limit_seconds, double peer_timeout_seconds, const Logger& logger);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

 private:
  void Watch();
  // Not rank 0, inside a job-wide call: answers rank 0's ping; ends on its verdict.
  void AnswerRoot(double busy);
  // Rank 0, once a job-wide call has lasted the peer timeout: asks who is there.
  void LookEarly(double busy);
  // Says who is silent (as far as `asked` found) and ends the job.
  [[noreturn]] void End(double busy, bool asked, const std::vector<int>& silent);
  // Who the hanging collective waits for, as a clause of the message; `silent` as the
  // finder reported it on `rank`, if it was `asked`.
  std::string WhoIsSilent(bool asked, const std::vector<int>& silent, int rank) const;

  const CallClock& clock_;
  Communicator& job_;
  std::unique_ptr<SilenceFinder> finder_;
  std::vector<std::string> hostnames_;
  double limit_seconds_;
  double peer_timeout_seconds_;
  const Logger& logger_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace lockstep
