#include "backends/nccl/inflight.h"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>

namespace lockstep {
namespace {

// How often the watchdog looks: a small share of the timeout, within [10 ms, 1 s].
std::chrono::milliseconds WatchPeriod(double timeout_seconds) {
  const double wanted_ms = timeout_seconds > 0 ? timeout_seconds * 1000 / 20 : 1000;
  return std::chrono::milliseconds(static_cast<int64_t>(std::clamp(wanted_ms, 10.0, 1000.0)));
}

}  // namespace

InflightCollectives::InflightCollectives(int device, double timeout_seconds)
    : device_(device), deadlines_(timeout_seconds) {
  watchdog_ = std::thread([this] { Watch(); });
}

InflightCollectives::~InflightCollectives() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (Entry& entry : queued_) ReleaseEvent(device_, entry.start);
}

void InflightCollectives::Add(cudaEvent_t start, std::shared_ptr<GpuEvent> done,
                              std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = deadlines_.Add(std::move(names));
  queued_.push_back(Entry{id, start, std::move(done)});
  if (!failure_.empty()) queued_.back().done->Fail(failure_);
}

void InflightCollectives::Watch() {
  prctl(PR_SET_NAME, "lockstep-gpuwd");
  const auto period = WatchPeriod(deadlines_.timeout_seconds());
  DeviceGuard guard(device_);  // this thread's CUDA calls are on the set's device
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    if (!failure_.empty() || queued_.empty()) continue;
    const std::string failure = CheckLocked(Clock::now());
    if (!failure.empty()) FailLocked(failure);
  }
}

std::string InflightCollectives::CheckLocked(Clock::time_point now) {
  for (auto it = queued_.begin(); it != queued_.end(); ++it) {
    const cudaError_t started = cudaEventQuery(it->start);
    if (started == cudaErrorNotReady) break;  // nor any later one, in stream order
    if (started == cudaSuccess) deadlines_.Started(it->id, now);
  }
  while (!queued_.empty()) {
    Entry& oldest = queued_.front();
    const cudaError_t status = cudaEventQuery(oldest.done->get());
    if (status == cudaErrorNotReady) break;
    if (status != cudaSuccess) {
      return std::string("the GPU failed while running the collective on tensor(s) ") +
             TensorList(deadlines_.PendingNames()) + ": " + cudaGetErrorName(status) + " (" +
             cudaGetErrorString(status) + ")";
    }
    deadlines_.Finished(oldest.id);
    ReleaseEvent(device_, oldest.start);
    queued_.pop_front();
  }
  return deadlines_.Expired(now);
}

void InflightCollectives::FailLocked(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  for (Entry& entry : queued_) entry.done->Fail(failure_);
}

std::string InflightCollectives::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

std::string InflightCollectives::Fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  FailLocked(why);
  return failure_;
}

bool InflightCollectives::Drain(double seconds) {
  const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(seconds));
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (!queued_.empty()) {
        const cudaError_t status = cudaEventQuery(queued_.front().done->get());
        if (status != cudaSuccess) break;
        deadlines_.Finished(queued_.front().id);
        ReleaseEvent(device_, queued_.front().start);
        queued_.pop_front();
      }
      if (queued_.empty()) return true;
      if (cudaEventQuery(queued_.front().done->get()) != cudaErrorNotReady) return false;
    }
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::vector<std::string> InflightCollectives::PendingNames() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return deadlines_.PendingNames();
}

size_t InflightCollectives::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_.size();
}

bool InflightCollectives::empty() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_.empty();
}

}  // namespace lockstep
