// Ends the job when one blocking collective has waited far too long. Negotiation is
// bounded and names unresponsive ranks itself (backends/mpi/mpi_exchange); but a rank
// that freezes or is cut off in the middle of a data collective leaves its peers
// inside a blocking MPI call that never returns and cannot be interrupted. This
// thread notices, says so on this rank, and calls MPI_Abort, which ends every rank
// the launcher can reach, instead of leaving the job hanging.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "backends/call_clock.h"
#include "backends/communicator.h"
#include "common/logging.h"

namespace lockstep {

class CollectiveWatchdog {
 public:
  // limit_seconds 0: never. `job`: all ranks, aborted when the limit passes.
  CollectiveWatchdog(const CallClock& clock, Communicator& job, double limit_seconds,
                     double peer_timeout_seconds, const Logger& logger);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

 private:
  void Watch();

  const CallClock& clock_;
  Communicator& job_;
  double limit_seconds_;
  double peer_timeout_seconds_;
  const Logger& logger_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace lockstep
