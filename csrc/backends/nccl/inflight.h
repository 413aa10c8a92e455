// The GPU collectives a set has queued but the GPU has not finished: their done
// events, when they were queued, and their tensors. Handles complete without waiting
// for the GPU, so this is where a collective that never finishes (a peer died, a
// network hung) is noticed: polled once per cycle, without blocking.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <deque>
#include <string>
#include <vector>

namespace lockstep {

class InflightCollectives {
 public:
  using Clock = std::chrono::steady_clock;
  // timeout_seconds == 0: never time out.
  InflightCollectives(int device, double timeout_seconds)
      : device_(device), timeout_seconds_(timeout_seconds) {}
  ~InflightCollectives();  // returns the events to the pool
  InflightCollectives(const InflightCollectives&) = delete;
  InflightCollectives& operator=(const InflightCollectives&) = delete;

  // Takes the event (from AcquireEvent), recorded after the collective.
  void Add(cudaEvent_t done, std::vector<std::string> names, Clock::time_point queued);
  // Retires what finished; returns why the set's GPU work failed (a CUDA error, or a
  // collective older than the timeout), naming its tensors, or "" if nothing did.
  std::string Poll(Clock::time_point now);
  // Waits (polling) until everything finished or `seconds` passed; true if finished.
  bool Drain(double seconds);
  // The tensors of the collectives still queued (for messages).
  std::vector<std::string> PendingNames() const;
  bool empty() const { return queued_.empty(); }

 private:
  struct Entry {
    cudaEvent_t done;
    std::vector<std::string> names;
    Clock::time_point queued;
  };
  int device_;
  double timeout_seconds_;
  std::deque<Entry> queued_;  // in stream order, so they finish front to back
};

}  // namespace lockstep
