#include "backends/mpi/mpi_silence_finder.h"

#include <chrono>
#include <thread>

namespace lockstep {

MpiSilenceFinder::MpiSilenceFinder(std::shared_ptr<PeerProbe> probe) : probe_(std::move(probe)) {}

std::vector<int> MpiSilenceFinder::FindSilentRanks(double wait_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto wait =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_seconds));
  if (probe_->rank() == 0) return probe_->FindSilent(wait);
  const auto deadline = Clock::now() + wait;
  std::vector<int> silent;
  while (Clock::now() < deadline) {
    switch (probe_->Poll(&silent)) {
      case PeerProbe::Notice::kVerdict:
        return silent;
      case PeerProbe::Notice::kKeepWaiting:
        return {};
      case PeerProbe::Notice::kNone:
      case PeerProbe::Notice::kAsked:
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {0};
}

void MpiSilenceFinder::ShareVerdict(const std::vector<int>& silent) {
  if (probe_->rank() == 0) probe_->SendVerdict(silent);
}

std::vector<int> MpiSilenceFinder::AnswerRoot() {
  std::vector<int> silent;
  if (probe_->rank() == 0 || probe_->Poll(&silent) != PeerProbe::Notice::kVerdict) return {};
  return silent;
}

}  // namespace lockstep
