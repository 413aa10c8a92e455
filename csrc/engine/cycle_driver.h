// Who runs the negotiation cycles: the engine's driving rules, all of them here.
//
// Every rank must run the same cycles in the same order, but not on the same thread:
// whichever thread holds the turn runs them (flat combining), one thread at a time.
// The background loop does when nobody else is; a caller waiting for its own op
// (Engine::Wait: every synchronous op) runs them itself while the loop is parked,
// which saves the two thread hand-offs (caller to loop and back) that dominated a
// small op's latency; a framework kernel that must not block until every rank arrives
// (Engine::EnqueueAndDrive) runs them within a budget. Each cycle still admits every
// thread's queued work, so nothing waits for one thread's op alone.
//
// The state is who holds the turn:
//
//   state \ event  LoopClaims  CallerClaims  KernelClaims  Release   Stop
//   kParked        kLoop       kCaller       kKernel       kParked   kStopped
//   kLoop          refused     refused       refused       kParked   kStopped
//   kCaller        refused     refused       refused       kParked   kStopped
//   kKernel        refused     refused       refused       kParked   kStopped
//   kStopped       refused     refused       refused       kStopped  kStopped
//
// A claim from a held state is the mutex refusing it: the loop waits for the turn, a
// caller or a kernel never does (it wakes the loop, which finishes its ops). Before
// claiming at all (MayClaim):
//   - callers only where MPI lets any thread call it, one at a time, and
//     LOCKSTEP_CALLER_CYCLES is on; kernels only then and where this host has a core
//     per rank: a cycle then needs every rank's process scheduled, and a kernel's
//     calls that each drive their own cycle in turn (instead of sharing cycles) took
//     30-46% longer at 3 ranks on 2 cores;
//   - never from a thread inside a cycle (a completion callback that waits): its own
//     turn is held further up its stack;
//   - a kernel only with budget left and, for executors whose kernels run in an order
//     that differs between ranks (KernelDrive::only_when_idle), only while nothing
//     else is in flight on this rank (KernelMayStay, under the turn).
// What the state decides elsewhere:
//   - kCaller and kKernel: negotiation waits as a blocked caller (WaitMode::kCaller);
//   - submitting wakes the loop unless the submitter is about to claim
//     (WakeLoopOnSubmit); a refused or finished claimant with work left wakes it too;
//   - a kernel that completed all its ops in its own cycles puts the loop's next idle
//     cycle the longest stretch away, until the loop runs a cycle itself
//     (kernel_cycles_only).
// Nobody else claims: a process-set change's proposer and threads waiting on a
// handle's callbacks leave the cycles to the loop.
#pragma once

#include <chrono>
#include <mutex>

#include "lockstep/values.h"

namespace lockstep {

class CycleDriver {
 public:
  enum class State { kParked, kLoop, kCaller, kKernel, kStopped };
  enum class Event { kLoopClaims, kCallerClaims, kKernelClaims, kRelease, kStop };
  enum class Who { kLoop, kCaller, kKernel };

  // The table above: the state after `event`; `taken` false where it is refused.
  struct Step {
    State to;
    bool taken;
  };
  static Step Next(State from, Event event);

  // `caller_cycles`: LOCKSTEP_CALLER_CYCLES; the others from the transport.
  CycleDriver(bool caller_cycles, bool any_thread_may_call, bool ranks_outnumber_cores);
  CycleDriver(const CycleDriver&) = delete;
  CycleDriver& operator=(const CycleDriver&) = delete;

  // Holding the turn: the thread that has it runs cycles (and owns all cycle state).
  // Empty when the claim was refused. Released when it goes out of scope.
  class Turn {
   public:
    Turn() = default;
    Turn(Turn&& other) noexcept;
    Turn& operator=(Turn&&) = delete;
    ~Turn() { Release(); }
    explicit operator bool() const { return driver_ != nullptr; }
    void Release();

   private:
    friend class CycleDriver;
    Turn(CycleDriver* driver, std::unique_lock<std::mutex> lock);
    CycleDriver* driver_ = nullptr;
    std::unique_lock<std::mutex> lock_;
    const CycleDriver* outer_ = nullptr;  // the thread's mark before this turn
  };

  // Whether `who` may try to claim from this thread now (the rules before a claim).
  bool MayClaim(Who who) const;
  bool MayClaimForKernel(std::chrono::microseconds budget) const;
  // The loop waits for the turn; empty once stopped.
  Turn ClaimForLoop() { return Claim(Event::kLoopClaims, /*wait=*/true); }
  // Callers and kernels never wait; empty when held, stopped or not allowed.
  Turn TryClaim(Who who);
  // Under a kernel's turn: whether it keeps it, given what else is in flight here
  // (asked only where it matters: the question walks every set).
  template <typename InFlight>
  static bool KernelMayStay(const KernelDrive& limits, InFlight other_work_in_flight) {
    return !limits.only_when_idle || !other_work_in_flight();
  }

  // Under a turn. Stop is final: every later claim is refused.
  void Stop();
  bool stopped() const { return state_ == State::kStopped; }
  State state() const { return state_; }
  // A thread blocked on its own op runs this cycle: negotiation waits for peers the
  // way MPI's blocking collectives do.
  bool caller_blocked() const { return state_ == State::kCaller || state_ == State::kKernel; }
  // A kernel's ops all completed in cycles it ran (call under its turn).
  void KernelFinishedItsOps() { kernel_cycles_only_ = true; }
  // Kernels ran every cycle since the loop last ran one (TimeUntilNextCycle).
  bool kernel_cycles_only() const { return kernel_cycles_only_; }
  // Under the loop's turn, as it starts a cycle.
  void LoopRunsCycle() { kernel_cycles_only_ = false; }

  // Whether a submitter should wake the loop: unless it is about to claim the turn
  // itself, or where callers never claim (then nobody but the loop runs cycles).
  bool WakeLoopOnSubmit(bool submitter_claims) const {
    return !submitter_claims || !callers_may_drive_;
  }
  bool callers_may_drive() const { return callers_may_drive_; }

 private:
  Turn Claim(Event event, bool wait);
  bool Apply(Event event);  // under the mutex

  const bool callers_may_drive_;
  const bool kernels_may_drive_;
  std::mutex mutex_;                 // held with the turn
  State state_ = State::kParked;     // mutex_
  bool kernel_cycles_only_ = false;  // mutex_
};

}  // namespace lockstep
