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

  // Marks one blocking call, from construction to destruction. `every_rank`: the call
  // is on a communicator of all the job's ranks, so every rank is inside it too.
  class Scope {
   public:
    Scope(CallClock& clock, bool every_rank) : clock_(clock) {
      clock_.every_rank_.store(every_rank, std::memory_order_relaxed);
      clock_.since_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
    ~Scope() { clock_.since_ns_.store(0, std::memory_order_relaxed); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallClock& clock_;
  };

  // Whether the current (or last) call involves every rank of the job: only then do
  // all ranks' watchdogs fire together and can ask each other who is silent.
  bool CallInvolvesEveryRank() const { return every_rank_.load(std::memory_order_relaxed); }

  // Seconds the current call has lasted; 0 when none is running.
  double BusySeconds() const {
    const int64_t since = since_ns_.load(std::memory_order_relaxed);
    if (since == 0) return 0;
    return std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(since))
        .count();
  }

 private:
  std::atomic<int64_t> since_ns_{0};
  std::atomic<bool> every_rank_{true};
};

}  // namespace lockstep
