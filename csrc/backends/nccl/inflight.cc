#include "backends/nccl/inflight.h"

#include <sstream>
#include <thread>

#include "backends/nccl/device_context.h"

namespace lockstep {

InflightCollectives::~InflightCollectives() {
  for (Entry& entry : queued_) ReleaseEvent(device_, entry.done);
}

void InflightCollectives::Add(cudaEvent_t done, std::vector<std::string> names,
                              Clock::time_point queued) {
  queued_.push_back(Entry{done, std::move(names), queued});
}

std::string InflightCollectives::Poll(Clock::time_point now) {
  while (!queued_.empty()) {
    Entry& oldest = queued_.front();
    const cudaError_t status = cudaEventQuery(oldest.done);
    if (status == cudaSuccess) {
      ReleaseEvent(device_, oldest.done);
      queued_.pop_front();
      continue;
    }
    if (status != cudaErrorNotReady) {
      return std::string("the GPU failed while running the collective on tensor(s) ") +
             TensorList(oldest.names) + ": " + cudaGetErrorName(status) + " (" +
             cudaGetErrorString(status) + ")";
    }
    const double waited = std::chrono::duration<double>(now - oldest.queued).count();
    if (timeout_seconds_ > 0 && waited > timeout_seconds_) {
      std::ostringstream text;
      text << "the GPU collective on tensor(s) " << TensorList(oldest.names)
           << " did not finish within " << timeout_seconds_
           << " s (LOCKSTEP_NCCL_TIMEOUT_SECONDS): a peer may have died or hung";
      return text.str();
    }
    return "";
  }
  return "";
}

bool InflightCollectives::Drain(double seconds) {
  const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(seconds));
  while (!queued_.empty()) {
    const cudaError_t status = cudaEventQuery(queued_.front().done);
    if (status == cudaSuccess) {
      ReleaseEvent(device_, queued_.front().done);
      queued_.pop_front();
      continue;
    }
    if (status != cudaErrorNotReady || Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

std::vector<std::string> InflightCollectives::PendingNames() const {
  std::vector<std::string> names;
  for (const Entry& entry : queued_)
    names.insert(names.end(), entry.names.begin(), entry.names.end());
  return names;
}

}  // namespace lockstep
