// The GPU collectives a set has queued but the GPU has not finished: for each, a
// start event (recorded after the waits for its inputs) and its done event. Handles
// complete without waiting for the GPU, so this is where a collective that never
// finishes (a peer died, a network hung) is noticed: by a watchdog thread of its own,
// so that it is noticed even while the background thread is blocked (in negotiation
// on a dead peer, say). The watchdog only observes and records; what to do with the
// communicator is left to the background thread, the one that uses it.
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/collective_deadlines.h"
#include "backends/nccl/device_context.h"

namespace lockstep {

class InflightCollectives {
 public:
  using Clock = CollectiveDeadlines::Clock;
  // timeout_seconds == 0: never time out (the watchdog still reports CUDA errors).
  InflightCollectives(int device, double timeout_seconds);
  ~InflightCollectives();  // stops the watchdog; returns the start events to the pool
  InflightCollectives(const InflightCollectives&) = delete;
  InflightCollectives& operator=(const InflightCollectives&) = delete;

  // Takes `start` (from AcquireEvent, recorded after the input waits) and shares `done`
  // (recorded after the collective) with the op's results.
  void Add(cudaEvent_t start, std::shared_ptr<GpuEvent> done, std::vector<std::string> names);
  // Why the set's GPU work failed (a CUDA error, a collective running longer than the
  // timeout), naming its tensors; "" while none did. Set by the watchdog, once.
  std::string failure() const;
  // Records a failure found elsewhere (an asynchronous NCCL error) and fails every
  // unfinished collective's done event with it. Returns the failure that counts (the
  // first one).
  std::string Fail(const std::string& why);
  // Waits (polling) until everything finished or `seconds` passed; true if finished.
  bool Drain(double seconds);
  std::vector<std::string> PendingNames() const;
  bool empty() const;
  size_t size() const;

 private:
  struct Entry {
    uint64_t id;
    cudaEvent_t start;
    std::shared_ptr<GpuEvent> done;
  };
  void Watch();
  // Retires finished entries, notes started ones; returns a failure or "". Locked.
  std::string CheckLocked(Clock::time_point now);
  void FailLocked(const std::string& why);

  int device_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  CollectiveDeadlines deadlines_;
  std::deque<Entry> queued_;  // in stream order, so they finish front to back
  std::string failure_;
  std::thread watchdog_;
};

}  // namespace lockstep
