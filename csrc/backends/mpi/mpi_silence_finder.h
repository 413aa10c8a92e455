// The SilenceFinder over MPI: a PeerProbe, the one the job's negotiation polls, so that
// ranks waiting there answer the watchdog's pings too.
#pragma once

#include <memory>
#include <vector>

#include "backends/communicator.h"
#include "backends/mpi/peer_probe.h"

namespace lockstep {

class MpiSilenceFinder : public SilenceFinder {
 public:
  explicit MpiSilenceFinder(std::shared_ptr<PeerProbe> probe);
  MpiSilenceFinder(const MpiSilenceFinder&) = delete;
  MpiSilenceFinder& operator=(const MpiSilenceFinder&) = delete;

  std::vector<int> FindSilentRanks(double wait_seconds) override;
  void ShareVerdict(const std::vector<int>& silent) override;
  std::vector<int> AnswerRoot() override;

 private:
  std::shared_ptr<PeerProbe> probe_;
};

}  // namespace lockstep
