// The threads that run cycles: the background loop, a caller waiting for its own op,
// a framework kernel within its budget. Which of them may, and when, is the cycle
// driver's (engine/cycle_driver.h, where the rules are documented); this file follows
// them.
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace lockstep {
namespace {

// Negotiation's waits for other ranks sleep a few microseconds at a time; the default
// timer slack (50 us) would stretch each one tenfold. Set once per thread that drives.
void UseFineTimerSlack() {
  thread_local bool done = false;
  if (!done) prctl(PR_SET_TIMERSLACK, 1000UL);
  done = true;
}

// Callbacks of EnqueueAndDrive's ops that complete on the thread driving for them run
// once it has let go of the cycles: they are a framework's continuation (a TensorFlow
// kernel's done), which may go on to run more of the user's program. Other ops'
// callbacks run where they complete, as on the background thread.
struct DeferredCall {
  DoneCallback done;
  Status status;
  OpResult result;
};
struct DeferredCallbacks {
  uint64_t owner = 0;  // identifies one EnqueueAndDrive call, across threads
  std::vector<DeferredCall> calls;
};
thread_local DeferredCallbacks* t_deferred = nullptr;

uint64_t NextDriveCall() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Each callback runs once, so it hands its `done` over instead of copying it.
DoneCallback DeferredWhileDriving(DoneCallback done, uint64_t owner) {
  return [done = std::move(done), owner](const Status& status, OpResult result) mutable {
    if (t_deferred == nullptr || t_deferred->owner != owner) {
      return done(status, std::move(result));
    }
    t_deferred->calls.push_back({std::move(done), status, std::move(result)});
  };
}

}  // namespace

void Engine::Loop() {
  prctl(PR_SET_TIMERSLACK, 1000UL);  // microsecond sleeps must stay microseconds
  while (true) {
    CycleDriver::Turn turn = driver_.ClaimForLoop();
    if (!turn) break;  // stopped
    const auto wait = TimeUntilNextCycle();
    if (wait.count() > 0) {
      turn.Release();
      queue_.WaitForWork(wait);  // then look again: a caller may have run cycles meanwhile
      continue;
    }
    driver_.LoopRunsCycle();
    DriveCycle();
  }
}

// Idle ranks still cycle, so that shutdowns and stalls are noticed; a rank with work
// cycles at once and waits inside the cycle for the others. Measured from the end of
// the last cycle, whoever ran it.
std::chrono::microseconds Engine::TimeUntilNextCycle() {
  using std::chrono::microseconds;
  if (shutdown_requested_ || AnyUnsent() || queue_.HasEntries()) return microseconds(0);
  // While framework kernels keep finishing their ops in cycles they run themselves (a
  // tf.function or jitted step called in a loop), those cycles do what idle cycles
  // would, and the loop woke every cycle_time only to find one had just run: at 2 ranks
  // that cost each 90 us tf.function call 6-9 us. So the next idle cycle is then the
  // longest stretch away; not where this rank is outside some set, whose members
  // negotiate through the global set's cycles and would wait for this rank's.
  const int stretch = driver_.kernel_cycles_only() && sets_.size() == table_.Ids().size()
                          ? kMaxIdleStretch
                          : idle_stretch_;
  const auto timeout = AnyPending() ? backoff_ : CycleTime(config_) * stretch;
  const auto left = last_cycle_end_ + timeout - std::chrono::steady_clock::now();
  return std::max(microseconds(0), std::chrono::duration_cast<microseconds>(left));
}

void Engine::DriveCycle() {
  AdmitNewEntries();
  timeline_.MarkCycle();
  try {
    if (!RunCycles()) Stop("lockstep has been shut down (a rank called shutdown())");
  } catch (const PeerTimeout& e) {
    world_.mark_peers_lost();  // a collective MPI_Finalize would wait for them forever
    // Python's elastic runner knows a stop for lost peers by this prefix.
    const std::string reason = std::string("lockstep stopped: ") + e.what();
    logger_.Log(LogLevel::kError, reason);
    Stop(reason);
  } catch (const std::exception& e) {
    const std::string reason = std::string("lockstep's background thread stopped: ") + e.what();
    logger_.Log(LogLevel::kError, reason);
    Stop(reason);
  }
  last_cycle_end_ = std::chrono::steady_clock::now();
}

void Engine::Stop(const std::string& reason) {
  driver_.Stop();
  FailEverything(reason);
  queue_.Wake();  // the loop may be parked: let it see the stop and end
}

// Enqueue's work for one op without its vectors: this is every synchronous op's path.
OpResult Engine::Run(OpSpec spec) {
  return Wait(
      SubmitOne(std::move(spec), nullptr, driver_.WakeLoopOnSubmit(/*submitter_claims=*/true)));
}

Handle Engine::SubmitOne(OpSpec spec, DoneCallback on_done, bool wake_loop) {
  TensorEntry entry = EntryFor(std::move(spec), /*group_id=*/0, /*group_size=*/0);
  entry.handle = handles_.Allocate(std::move(on_done));
  const Handle handle = entry.handle;
  Submit(&entry, 1, wake_loop);
  return handle;
}

OpResult Engine::Wait(Handle handle) {
  if (!driver_.MayClaim(CycleDriver::Who::kCaller) || handles_.DoneOrUnknown(handle)) {
    return handles_.Wait(handle);
  }
  CycleDriver::Turn turn = driver_.TryClaim(CycleDriver::Who::kCaller);
  if (!turn) {
    // Another thread runs the cycles; it may be waiting for peers with nothing of its
    // own at stake, polling coarsely: tell it local work arrived.
    queue_.Wake();
    return handles_.Wait(handle);
  }
  DriveUntilDone(&handle, 1, std::chrono::steady_clock::time_point::max());
  turn.Release();
  return handles_.Wait(handle);
}

void Engine::EnqueueAndDrive(std::vector<OpSpec> specs, bool grouped,
                             std::vector<DoneCallback> callbacks, const KernelDrive& limits) {
  const auto deadline = std::chrono::steady_clock::now() + limits.budget;
  const bool drive = driver_.MayClaimForKernel(limits.budget);
  DeferredCallbacks deferred;
  if (drive) {
    deferred.owner = NextDriveCall();
    deferred.calls.reserve(callbacks.size());
    for (DoneCallback& callback : callbacks) {
      callback = DeferredWhileDriving(std::move(callback), deferred.owner);
    }
  }
  // One op (a lone collective of a compiled program) skips Enqueue's vectors, as Run does.
  Handle lone = 0;
  std::vector<Handle> handles;
  if (specs.size() == 1 && callbacks.size() == 1 && !grouped) {
    lone = SubmitOne(std::move(specs.front()), std::move(callbacks.front()),
                     driver_.WakeLoopOnSubmit(/*submitter_claims=*/drive));
  } else {
    handles = Enqueue(std::move(specs), grouped, std::move(callbacks), /*wake_loop=*/!drive);
  }
  const Handle* ids = handles.empty() ? &lone : handles.data();
  const size_t count = handles.empty() ? 1 : handles.size();
  if (!drive) return;
  {
    CycleDriver::Turn turn = driver_.TryClaim(CycleDriver::Who::kKernel);
    if (!turn) {
      queue_.Wake();  // as in Wait: the thread running cycles may be polling coarsely
      return;
    }
    if (!CycleDriver::KernelMayStay(limits, [this] { return AnyPending() || AnyUnsent(); })) {
      turn.Release();
      queue_.Wake();  // the loop finishes these ops along with what is in flight
      return;
    }
    t_deferred = &deferred;
    DriveUntilDone(ids, count, deadline, limits.max_cycles);
    t_deferred = nullptr;
    if (deferred.calls.size() == count) driver_.KernelFinishedItsOps();
  }
  for (DeferredCall& call : deferred.calls) call.done(call.status, std::move(call.result));
}

void Engine::DriveUntilDone(const Handle* handles, size_t count,
                            std::chrono::steady_clock::time_point deadline, int max_cycles) {
  UseFineTimerSlack();
  const auto all_done = [&] {
    return std::all_of(handles, handles + count,
                       [&](Handle handle) { return handles_.DoneOrUnknown(handle); });
  };
  for (int cycles = 0; !driver_.stopped() && !all_done(); ++cycles) {
    if (max_cycles > 0 && cycles == max_cycles) break;
    const auto wait = TimeUntilNextCycle();
    if (wait.count() > 0) {
      if (std::chrono::steady_clock::now() + wait >= deadline) break;
      queue_.WaitForWork(wait);  // backing off, as the loop would
    }
    DriveCycle();
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  // Work still in flight (other threads', or this caller's past its deadline) goes
  // back to the loop.
  if (!driver_.stopped() && (AnyPending() || AnyUnsent() || queue_.HasEntries())) queue_.Wake();
}

}  // namespace lockstep
