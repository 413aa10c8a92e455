// Who is still there, once a collective has outlasted the peer timeout. A collective
// that never completes cannot say which rank is missing, so rank 0 then asks every
// rank directly (point to point, on a communicator of its own that no stuck collective
// blocks) and tells the ranks that answered whom to blame. One probe serves a
// communicator's negotiation and, for the whole job, the collective watchdog: a rank
// answers rank 0 whether it waits in negotiation or inside a data collective, so rank
// 0 never blames a rank only for being busy in the other kind of wait. Nothing here
// runs while the job is healthy, except two cheap probes per poll on ranks that
// already wait.
#pragma once

#include <mpi.h>

#include <chrono>
#include <mutex>
#include <vector>

namespace lockstep {

class PeerProbe {
 public:
  // Collective over `comm`: the probe talks on a duplicate of its own.
  explicit PeerProbe(MPI_Comm comm);
  ~PeerProbe();
  PeerProbe(const PeerProbe&) = delete;
  PeerProbe& operator=(const PeerProbe&) = delete;

  int rank() const { return rank_; }

  // Rank 0: pings every other rank and waits up to `wait` for answers; returns the
  // ranks that stayed silent, ascending.
  std::vector<int> FindSilent(std::chrono::steady_clock::duration wait);
  // Rank 0: sends the silent ranks to every rank that answered, or, when none is
  // silent, tells every rank to keep waiting. Does not wait.
  void SendVerdict(const std::vector<int>& silent);

  // kAsked: rank 0 pinged (it is alive and judging; its verdict follows).
  enum class Notice { kNone, kAsked, kKeepWaiting, kVerdict };
  // Other ranks, while they wait: answers rank 0's ping, and returns what rank 0
  // decided, if it did (the silent ranks land in *silent).
  Notice Poll(std::vector<int>* silent);

 private:
  // Negotiation (the background thread) and the watchdog's thread may both use the
  // probe: one at a time, so that neither takes the other's answers.
  std::mutex mutex_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace lockstep
