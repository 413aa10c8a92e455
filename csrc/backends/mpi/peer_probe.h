// Who is still there, once a negotiation collective has outlasted the peer timeout. A
// non-blocking collective that never completes cannot say which rank is missing, so
// rank 0 then asks every rank directly (point to point, on a communicator of its own
// that no stuck collective blocks) and tells the ranks that answered whom to blame;
// ranks that are waiting answer and listen for that verdict as part of their polling.
// Nothing here runs while negotiation is healthy, except two cheap probes per poll on
// ranks that already wait.
#pragma once

#include <mpi.h>

#include <chrono>
#include <vector>

namespace lockstep {

class PeerProbe {
 public:
  // `comm` belongs to the probe (a duplicate made for it).
  explicit PeerProbe(MPI_Comm comm);

  // Rank 0: pings every other rank and waits up to `wait` for answers; returns the
  // ranks that stayed silent, ascending.
  std::vector<int> FindSilent(std::chrono::steady_clock::duration wait);
  // Rank 0: sends the silent ranks to every rank that answered, or, when none is
  // silent, tells every rank to keep waiting. Does not wait.
  void SendVerdict(const std::vector<int>& silent);

  enum class Notice { kNone, kKeepWaiting, kVerdict };
  // Other ranks, while they wait: answers rank 0's ping, and returns what rank 0
  // decided, if it did (the silent ranks land in *silent).
  Notice Poll(std::vector<int>* silent);

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace lockstep
