// Who runs the cycles. Every rank must run the same cycles in the same order, but not
// on the same thread: whichever thread holds driver_ runs them (flat combining). The
// background loop does when nobody else is; a caller waiting for its own op runs them
// itself when the loop is parked, which saves the two thread hand-offs (caller to loop
// and back) that dominated a small op's latency. Each cycle still admits every
// thread's queued work, so nothing waits for the caller's op alone.
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace lockstep {
namespace {

// The engine whose cycle this thread is running, if any: a completion callback that
// waits on a handle from inside a cycle must not try to drive again.
thread_local const Engine* t_driving = nullptr;

class DrivingMark {
 public:
  explicit DrivingMark(const Engine* engine) : previous_(t_driving) { t_driving = engine; }
  ~DrivingMark() { t_driving = previous_; }
  DrivingMark(const DrivingMark&) = delete;
  DrivingMark& operator=(const DrivingMark&) = delete;

 private:
  const Engine* previous_;
};

// Negotiation's waits for other ranks sleep a few microseconds at a time; the default
// timer slack (50 us) would stretch each one tenfold. Set once per thread that drives.
void UseFineTimerSlack() {
  thread_local bool done = false;
  if (!done) prctl(PR_SET_TIMERSLACK, 1000UL);
  done = true;
}

// Marks the cycles a caller runs for its own op (Engine::caller_driving_).
class CallerDriving {
 public:
  explicit CallerDriving(bool* flag) : flag_(flag) { *flag_ = true; }
  ~CallerDriving() { *flag_ = false; }
  CallerDriving(const CallerDriving&) = delete;
  CallerDriving& operator=(const CallerDriving&) = delete;

 private:
  bool* flag_;
};

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
  DrivingMark mark(this);
  while (true) {
    std::unique_lock<std::mutex> drive(driver_);
    if (stopped_) break;
    const auto wait = TimeUntilNextCycle();
    if (wait.count() > 0) {
      drive.unlock();
      queue_.WaitForWork(wait);  // then look again: a caller may have run cycles meanwhile
      continue;
    }
    kernel_cycles_ = false;
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
  const int stretch =
      kernel_cycles_ && sets_.size() == table_.Ids().size() ? kMaxIdleStretch : idle_stretch_;
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
  stopped_ = true;
  FailEverything(reason);
  queue_.Wake();  // the loop may be parked: let it see stopped_ and end
}

// Enqueue's work for one op without its vectors: this is every synchronous op's path.
OpResult Engine::Run(OpSpec spec) {
  return Wait(SubmitOne(std::move(spec), nullptr, /*wake_loop=*/!callers_drive_));
}

Handle Engine::SubmitOne(OpSpec spec, DoneCallback on_done, bool wake_loop) {
  TensorEntry entry = EntryFor(std::move(spec), /*group_id=*/0, /*group_size=*/0);
  entry.handle = handles_.Allocate(std::move(on_done));
  const Handle handle = entry.handle;
  Submit(&entry, 1, wake_loop);
  return handle;
}

OpResult Engine::Wait(Handle handle) {
  if (!callers_drive_ || t_driving != nullptr || handles_.DoneOrUnknown(handle)) {
    return handles_.Wait(handle);
  }
  std::unique_lock<std::mutex> drive(driver_, std::try_to_lock);
  if (!drive.owns_lock()) {
    // Another thread runs the cycles; it may be waiting for peers with nothing of its
    // own at stake, polling coarsely: tell it local work arrived.
    queue_.Wake();
    return handles_.Wait(handle);
  }
  DriveUntilDone(&handle, 1, std::chrono::steady_clock::time_point::max());
  drive.unlock();
  return handles_.Wait(handle);
}

void Engine::EnqueueAndDrive(std::vector<OpSpec> specs, bool grouped,
                             std::vector<DoneCallback> callbacks, const KernelDrive& limits) {
  const auto deadline = std::chrono::steady_clock::now() + limits.budget;
  const bool drive = kernels_drive_ && t_driving == nullptr && limits.budget.count() > 0;
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
    lone = SubmitOne(std::move(specs.front()), std::move(callbacks.front()), !drive);
  } else {
    handles = Enqueue(std::move(specs), grouped, std::move(callbacks), /*wake_loop=*/!drive);
  }
  const Handle* ids = handles.empty() ? &lone : handles.data();
  const size_t count = handles.empty() ? 1 : handles.size();
  if (!drive) return;
  {
    std::unique_lock<std::mutex> driving(driver_, std::try_to_lock);
    if (!driving.owns_lock()) {
      queue_.Wake();  // as in Wait: the thread running cycles may be polling coarsely
      return;
    }
    if (limits.only_when_idle && (AnyPending() || AnyUnsent())) {
      driving.unlock();
      queue_.Wake();  // the loop finishes these ops along with what is in flight
      return;
    }
    t_deferred = &deferred;
    DriveUntilDone(ids, count, deadline, limits.max_cycles);
    t_deferred = nullptr;
    if (deferred.calls.size() == count) kernel_cycles_ = true;
  }
  for (DeferredCall& call : deferred.calls) call.done(call.status, std::move(call.result));
}

void Engine::DriveUntilDone(const Handle* handles, size_t count,
                            std::chrono::steady_clock::time_point deadline, int max_cycles) {
  UseFineTimerSlack();
  DrivingMark mark(this);
  CallerDriving caller(&caller_driving_);
  const auto all_done = [&] {
    return std::all_of(handles, handles + count,
                       [&](Handle handle) { return handles_.DoneOrUnknown(handle); });
  };
  for (int cycles = 0; !stopped_ && !all_done(); ++cycles) {
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
  if (!stopped_ && (AnyPending() || AnyUnsent() || queue_.HasEntries())) queue_.Wake();
}

}  // namespace lockstep
