// MPI set-up and tear-down: initialization (or adoption of an MPI the program
// already initialized), the private communicators lockstep uses, and topology.
#pragma once

#include <mpi.h>

#include <string>
#include <thread>
#include <vector>

#include "lockstep/values.h"

namespace lockstep {

class MpiContext {
 public:
  // Initializes MPI if needed and duplicates the job's world (MPI_COMM_WORLD, or its
  // survivors after ShrinkWorldToSurvivors), so lockstep's traffic never matches
  // messages of the user's own MPI code.
  MpiContext();
  ~MpiContext();
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  MPI_Comm comm() const { return comm_; }
  const Topology& topology() const { return topology_; }
  bool threads_supported() const { return thread_level_ == MPI_THREAD_MULTIPLE; }
  // Any thread may call MPI, one at a time (MPI_THREAD_SERIALIZED or better).
  bool any_thread_may_call() const { return thread_level_ >= MPI_THREAD_SERIALIZED; }
  // Every rank's host name, by rank, for messages that name ranks.
  const std::vector<std::string>& hostnames() const { return hostnames_; }
  // Collective: whether every process of the world is alive, the same answer on every
  // survivor (ULFM's agreement, over a communicator of its own so that it never
  // interleaves with the background thread's calls). True without fault tolerance.
  // Throws PeerTimeout when some rank has not taken part within `timeout_seconds`.
  bool EveryProcessAlive(double timeout_seconds) const;
  // This host runs more of the job's ranks than it has cores: waits must yield.
  bool ranks_outnumber_cores() const {
    const unsigned cores = std::thread::hardware_concurrency();  // 0: unknown
    return cores > 0 && topology_.local_size > static_cast<int>(cores);
  }

 private:
  void GatherHostnames();

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm agreement_comm_ = MPI_COMM_NULL;  // only where processes can fail alone
  Topology topology_;
  int thread_level_ = MPI_THREAD_SINGLE;
  std::vector<std::string> hostnames_;
};

// Finalizes MPI at process exit if lockstep was the one that initialized it, unless
// peers were lost.
void FinalizeMpiAtExitIfOwned();

// Some ranks stopped responding: MPI_Finalize would wait for them forever, so the
// process ends without it (Open MPI's launcher then ends the whole job).
void MarkPeersLost();

// The communicator lockstep's world is made from: MPI_COMM_WORLD, until processes
// were lost and the survivors shrank it.
MPI_Comm WorldBase();

}  // namespace lockstep
