// The SilenceFinder over MPI: a PeerProbe on a duplicate communicator of its own, so
// that its pings neither wait behind nor disturb the collective that hangs.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "backends/communicator.h"
#include "backends/mpi/peer_probe.h"

namespace lockstep {

class MpiSilenceFinder : public SilenceFinder {
 public:
  explicit MpiSilenceFinder(MPI_Comm comm);  // collective over `comm`
  ~MpiSilenceFinder() override;
  MpiSilenceFinder(const MpiSilenceFinder&) = delete;
  MpiSilenceFinder& operator=(const MpiSilenceFinder&) = delete;

  std::vector<int> FindSilentRanks(double wait_seconds) override;
  void ShareVerdict(const std::vector<int>& silent) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  std::unique_ptr<PeerProbe> probe_;
};

}  // namespace lockstep
