// The GPU's phases of each response for the timeline (waiting for the inputs, the
// fusion copies, the NCCL collective), timed with CUDA events on lockstep's stream and
// written once the GPU has run them, so the background thread never waits for them.
// Only while the timeline records; otherwise every call returns at once.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "common/phase_recorder.h"

namespace lockstep {

class GpuPhaseTimer {
 public:
  using Clock = std::chrono::steady_clock;
  GpuPhaseTimer(int device, PhaseRecorder* phases) : device_(device), phases_(phases) {}
  ~GpuPhaseTimer();
  GpuPhaseTimer(const GpuPhaseTimer&) = delete;
  GpuPhaseTimer& operator=(const GpuPhaseTimer&) = delete;

  // `phase` of the response being queued starts when the GPU gets here on `stream`;
  // it ends where the next one starts, or at Finish.
  void Mark(cudaStream_t stream, const char* phase);
  // The response's work is queued; its phases are written under each of `names`.
  void Finish(cudaStream_t stream, const std::vector<std::string>& names);
  // Writes the phases of responses the GPU has finished. Never waits for the GPU.
  void Poll();

 private:
  struct PhaseStart {
    cudaEvent_t event;
    std::string phase;
  };
  struct Finished {
    std::vector<std::string> names;
    std::vector<PhaseStart> marks;
    cudaEvent_t end;
  };
  bool Recording() const { return phases_ != nullptr && phases_->active(); }
  cudaEvent_t TimingEvent();
  void Recycle(cudaEvent_t event) { free_.push_back(event); }
  bool Anchor();
  Clock::time_point HostTime(cudaEvent_t event) const;

  int device_;
  PhaseRecorder* phases_;
  std::vector<PhaseStart> current_;  // the response being queued
  std::deque<Finished> finished_;
  std::vector<cudaEvent_t> free_;
  // GPU time to host time: an event recorded on an idle stream of our own completes at
  // once, so waiting for it (briefly, once a minute while recording) pins a GPU instant
  // to a host instant; events' times are then offsets from it.
  cudaStream_t anchor_stream_ = nullptr;
  cudaEvent_t anchor_ = nullptr;
  Clock::time_point anchor_time_;
};

}  // namespace lockstep
