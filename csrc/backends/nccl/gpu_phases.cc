#include "backends/nccl/gpu_phases.h"

namespace lockstep {
namespace {

// Re-anchored this often while recording: elapsed times are floats in milliseconds,
// about 4 us apart a minute after the anchor.
constexpr std::chrono::seconds kAnchorLifetime{60};

}  // namespace

GpuPhaseTimer::~GpuPhaseTimer() {
  for (const PhaseStart& mark : current_) cudaEventDestroy(mark.event);
  for (const Finished& done : finished_) {
    for (const PhaseStart& mark : done.marks) cudaEventDestroy(mark.event);
    cudaEventDestroy(done.end);
  }
  for (cudaEvent_t event : free_) cudaEventDestroy(event);
  if (anchor_ != nullptr) cudaEventDestroy(anchor_);
  if (anchor_stream_ != nullptr) cudaStreamDestroy(anchor_stream_);
}

cudaEvent_t GpuPhaseTimer::TimingEvent() {
  if (!free_.empty()) {
    cudaEvent_t event = free_.back();
    free_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  return cudaEventCreate(&event) == cudaSuccess ? event : nullptr;
}

bool GpuPhaseTimer::Anchor() {
  if (anchor_ != nullptr) {
    // Moving the anchor would shift the times of events still waiting to be written.
    const bool idle = current_.empty() && finished_.empty();
    if (!idle || Clock::now() - anchor_time_ <= kAnchorLifetime) return true;
  }
  if (anchor_stream_ == nullptr &&
      cudaStreamCreateWithFlags(&anchor_stream_, cudaStreamNonBlocking) != cudaSuccess) {
    anchor_stream_ = nullptr;
    return false;
  }
  if (anchor_ == nullptr && cudaEventCreate(&anchor_) != cudaSuccess) {
    anchor_ = nullptr;
    return false;
  }
  if (cudaEventRecord(anchor_, anchor_stream_) != cudaSuccess ||
      cudaEventSynchronize(anchor_) != cudaSuccess) {
    return false;
  }
  anchor_time_ = Clock::now();
  return true;
}

void GpuPhaseTimer::Mark(cudaStream_t stream, const char* phase) {
  if (!Recording() || !Anchor()) return;
  cudaEvent_t event = TimingEvent();
  if (event == nullptr) return;
  if (cudaEventRecord(event, stream) != cudaSuccess) {
    Recycle(event);
    return;
  }
  current_.push_back(PhaseStart{event, phase});
}

void GpuPhaseTimer::Finish(cudaStream_t stream, const std::vector<std::string>& names) {
  if (current_.empty()) return;
  cudaEvent_t end = TimingEvent();
  if (end == nullptr || cudaEventRecord(end, stream) != cudaSuccess) {
    for (const PhaseStart& mark : current_) Recycle(mark.event);
    if (end != nullptr) Recycle(end);
    current_.clear();
    return;
  }
  finished_.push_back(Finished{names, std::move(current_), end});
  current_.clear();
}

GpuPhaseTimer::Clock::time_point GpuPhaseTimer::HostTime(cudaEvent_t event) const {
  float milliseconds = 0;
  if (cudaEventElapsedTime(&milliseconds, anchor_, event) != cudaSuccess) return anchor_time_;
  return anchor_time_ + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double, std::milli>(milliseconds));
}

void GpuPhaseTimer::Poll() {
  while (!finished_.empty()) {
    Finished& oldest = finished_.front();
    const cudaError_t status = cudaEventQuery(oldest.end);
    if (status == cudaErrorNotReady) return;
    if (status == cudaSuccess && Recording()) {
      for (size_t i = 0; i < oldest.marks.size(); ++i) {
        const Clock::time_point start = HostTime(oldest.marks[i].event);
        const Clock::time_point end =
            HostTime(i + 1 < oldest.marks.size() ? oldest.marks[i + 1].event : oldest.end);
        for (const std::string& name : oldest.names) {
          phases_->Slice(name, oldest.marks[i].phase, start, end);
        }
      }
    }
    for (const PhaseStart& mark : oldest.marks) Recycle(mark.event);
    Recycle(oldest.end);
    finished_.pop_front();
  }
}

}  // namespace lockstep
