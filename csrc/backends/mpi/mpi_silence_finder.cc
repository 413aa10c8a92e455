#include "backends/mpi/mpi_silence_finder.h"

#include <chrono>
#include <thread>

#include "lockstep/lockstep.h"

namespace lockstep {

MpiSilenceFinder::MpiSilenceFinder(MPI_Comm comm) {
  if (MPI_Comm_dup(comm, &comm_) != MPI_SUCCESS) throw Error("MPI_Comm_dup failed");
  // A peer that is gone must make a call fail, not end the process.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  probe_ = std::make_unique<PeerProbe>(comm_);
}

MpiSilenceFinder::~MpiSilenceFinder() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

std::vector<int> MpiSilenceFinder::FindSilentRanks(double wait_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto wait =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_seconds));
  if (rank_ == 0) return probe_->FindSilent(wait);
  const auto deadline = Clock::now() + wait;
  std::vector<int> silent;
  while (Clock::now() < deadline) {
    switch (probe_->Poll(&silent)) {
      case PeerProbe::Notice::kVerdict:
        return silent;
      case PeerProbe::Notice::kKeepWaiting:
        return {};
      case PeerProbe::Notice::kNone:
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {0};
}

void MpiSilenceFinder::ShareVerdict(const std::vector<int>& silent) {
  if (rank_ == 0) probe_->SendVerdict(silent);
}

}  // namespace lockstep
