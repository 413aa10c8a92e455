// When the blocking collective now running began, readable from another thread: a
// frozen or cut-off peer never fails an MPI call, it only makes it last forever, and
// a watchdog can notice that.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace lockstep {

class CallClock {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks one blocking call, from construction to destruction.
  class Scope {
   public:
    explicit Scope(CallClock& clock) : clock_(clock) {
      clock_.since_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    ~Scope() { clock_.since_ns_.store(0, std::memory_order_relaxed); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallClock& clock_;
  };

  // Seconds the current call has lasted; 0 when none is running.
  double BusySeconds() const {
    const int64_t since = since_ns_.load(std::memory_order_relaxed);
    if (since == 0) return 0;
    return std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(since))
        .count();
  }

 private:
  std::atomic<int64_t> since_ns_{0};
};

}  // namespace lockstep
