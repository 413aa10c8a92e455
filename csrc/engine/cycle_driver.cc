#include "engine/cycle_driver.h"

#include <utility>

namespace lockstep {
namespace {

// The driver whose turn this thread holds, if any: a completion callback that waits on
// a handle from inside a cycle must not claim again (its turn is further up the stack).
thread_local const CycleDriver* t_inside = nullptr;

}  // namespace

CycleDriver::Step CycleDriver::Next(State from, Event event) {
  if (event == Event::kStop) return {State::kStopped, true};
  if (from == State::kStopped) return {State::kStopped, event == Event::kRelease};
  if (event == Event::kRelease) return {State::kParked, true};
  if (from != State::kParked) return {from, false};  // somebody holds the turn
  switch (event) {
    case Event::kLoopClaims:
      return {State::kLoop, true};
    case Event::kCallerClaims:
      return {State::kCaller, true};
    case Event::kKernelClaims:
      return {State::kKernel, true};
    case Event::kRelease:
    case Event::kStop:
      break;
  }
  return {from, false};
}

CycleDriver::CycleDriver(bool caller_cycles, bool any_thread_may_call, bool ranks_outnumber_cores)
    : callers_may_drive_(caller_cycles && any_thread_may_call),
      kernels_may_drive_(callers_may_drive_ && !ranks_outnumber_cores) {}

bool CycleDriver::MayClaim(Who who) const {
  if (t_inside != nullptr) return false;
  switch (who) {
    case Who::kLoop:
      return true;
    case Who::kCaller:
      return callers_may_drive_;
    case Who::kKernel:
      return kernels_may_drive_;
  }
  return false;
}

bool CycleDriver::MayClaimForKernel(std::chrono::microseconds budget) const {
  return MayClaim(Who::kKernel) && budget.count() > 0;
}

CycleDriver::Turn CycleDriver::TryClaim(Who who) {
  if (!MayClaim(who)) return Turn();
  const Event event = who == Who::kCaller   ? Event::kCallerClaims
                      : who == Who::kKernel ? Event::kKernelClaims
                                            : Event::kLoopClaims;
  return Claim(event, /*wait=*/false);
}

CycleDriver::Turn CycleDriver::Claim(Event event, bool wait) {
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return Turn();  // held: Next(held, claim) refuses it
  }
  if (!Apply(event)) return Turn();  // stopped
  return Turn(this, std::move(lock));
}

bool CycleDriver::Apply(Event event) {
  const Step step = Next(state_, event);
  if (step.taken) state_ = step.to;
  return step.taken;
}

void CycleDriver::Stop() { Apply(Event::kStop); }

CycleDriver::Turn::Turn(CycleDriver* driver, std::unique_lock<std::mutex> lock)
    : driver_(driver), lock_(std::move(lock)), outer_(t_inside) {
  t_inside = driver_;
}

CycleDriver::Turn::Turn(Turn&& other) noexcept
    : driver_(std::exchange(other.driver_, nullptr)),
      lock_(std::move(other.lock_)),
      outer_(other.outer_) {}

void CycleDriver::Turn::Release() {
  if (driver_ == nullptr) return;
  driver_->Apply(Event::kRelease);
  t_inside = outer_;
  driver_ = nullptr;
  lock_.unlock();
}

}  // namespace lockstep
