// A process set's communicator as the engine sees it: the one seam through which the
// engine reaches the transport (MPI, in backends/mpi/mpi_communicator) for everything
// but the collectives' own calls. Engine and negotiation headers hold no MPI type;
// unit tests can stand in a transport of their own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/call_clock.h"
#include "lockstep/values.h"
#include "negotiation/exchange.h"

namespace lockstep {

// The host transport a set's collectives run on, and its optional fast paths.
struct HostBackendOptions {
  static constexpr int64_t kLargestShm = INT64_MAX;  // as large as the transport allows
  int64_t shm_bytes = 0;                             // shared-memory slots (pieces up to this size)
  int shm_min_ranks = 0;  // shared memory from this many ranks on one host; 0: never
  bool hierarchical = false;
};

// Who is still there, asked from a thread of its own while a blocking collective hangs
// and cannot say which rank it waits for (the collective watchdog's last look before it
// ends the job).
class SilenceFinder {
 public:
  virtual ~SilenceFinder() = default;
  // Every rank calls this once, at about the same time. Rank 0 asks every rank and
  // returns those that stayed silent within `wait_seconds`. The others answer and
  // return rank 0's verdict (empty: all answered); when none comes in time, {0}.
  virtual std::vector<int> FindSilentRanks(double wait_seconds) = 0;
  // Rank 0, after FindSilentRanks: tells the ranks that answered. Does not wait.
  virtual void ShareVerdict(const std::vector<int>& silent) = 0;
  // Other ranks, while a blocking call of theirs hangs: answers rank 0's ping, if one
  // came, and returns the silent ranks of rank 0's verdict, if one came (else empty).
  // Does not wait.
  virtual std::vector<int> AnswerRoot() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Collective over this communicator: members get a communicator of their own,
  // ranked in this one's order; the others get null.
  virtual std::unique_ptr<Communicator> Split(bool member) = 0;
  // Blocking, collective: the largest `value` of any rank.
  virtual double MaxAcrossRanks(double value) = 0;
  // Collective: negotiation's exchange among these ranks.
  virtual std::unique_ptr<Exchange> NewExchange(ExchangeOptions options) = 0;
  // Collective: the host collectives' transport among these ranks; its blocking
  // calls are marked on `clock`.
  virtual std::unique_ptr<Backend> NewHostBackend(const HostBackendOptions& options,
                                                  CallClock& clock) = 0;
  // Collective: a SilenceFinder of its own over these ranks; null where the transport
  // cannot be called from a second thread while the first is inside a collective.
  virtual std::unique_ptr<SilenceFinder> NewSilenceFinder() = 0;
  // Ends every process of the job at once (a collective that can never return).
  [[noreturn]] virtual void Abort() = 0;
};

// The job as the transport started it.
struct World {
  std::shared_ptr<Communicator> communicator;  // all ranks
  Topology topology;
  std::vector<std::string> hostnames;  // [r]: rank r's host
  bool threads_supported = false;      // the transport may be called from any thread
  bool any_thread_may_call = false;    // ... from any thread, one at a time
  bool ranks_outnumber_cores = false;  // this host runs more ranks than it has cores
  // Some ranks stopped answering: the process must end without the transport's
  // collective shutdown, which would wait for them forever.
  std::function<void()> mark_peers_lost = [] {};
  // Collective: true on every rank if no process of the job has failed, false on every
  // survivor if one has (see EveryProcessAlive in lockstep.h); throws PeerTimeout when
  // a rank has not taken part within the timeout (seconds, 0: none).
  std::function<bool(double)> every_process_alive = [](double) { return true; };
};

}  // namespace lockstep
