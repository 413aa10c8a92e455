// The rules of who runs the engine's cycles (engine/cycle_driver.h): the transition
// table, the policy before a claim, and turns held by real threads (the loop waiting
// for one, callers and kernels refused while another thread holds it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/cycle_driver.h"

namespace lockstep {
namespace {

using State = CycleDriver::State;
using Event = CycleDriver::Event;
using Who = CycleDriver::Who;

TEST(CycleDriverTest, TheTransitionTable) {
  const State held[] = {State::kLoop, State::kCaller, State::kKernel};
  const Event claims[] = {Event::kLoopClaims, Event::kCallerClaims, Event::kKernelClaims};
  for (int i = 0; i < 3; ++i) {
    const CycleDriver::Step from_parked = CycleDriver::Next(State::kParked, claims[i]);
    EXPECT_TRUE(from_parked.taken);
    EXPECT_EQ(from_parked.to, held[i]);
    for (State holder : held) {  // somebody holds the turn: every claim is refused
      const CycleDriver::Step refused = CycleDriver::Next(holder, claims[i]);
      EXPECT_FALSE(refused.taken);
      EXPECT_EQ(refused.to, holder);
    }
    EXPECT_FALSE(CycleDriver::Next(State::kStopped, claims[i]).taken);
    EXPECT_EQ(CycleDriver::Next(State::kStopped, claims[i]).to, State::kStopped);
  }
  for (State from : {State::kParked, State::kLoop, State::kCaller, State::kKernel}) {
    EXPECT_EQ(CycleDriver::Next(from, Event::kRelease).to, State::kParked);
    EXPECT_EQ(CycleDriver::Next(from, Event::kStop).to, State::kStopped);
  }
  // Stopped is final: releasing the turn that stopped leaves it stopped.
  EXPECT_EQ(CycleDriver::Next(State::kStopped, Event::kRelease).to, State::kStopped);
  EXPECT_EQ(CycleDriver::Next(State::kStopped, Event::kStop).to, State::kStopped);
}

TEST(CycleDriverTest, WhoMayClaimFollowsTheTransportAndTheSetting) {
  const CycleDriver all(true, true, false);
  EXPECT_TRUE(all.MayClaim(Who::kLoop));
  EXPECT_TRUE(all.MayClaim(Who::kCaller));
  EXPECT_TRUE(all.MayClaimForKernel(std::chrono::microseconds(200)));
  EXPECT_FALSE(all.MayClaimForKernel(std::chrono::microseconds(0)));  // no budget
  EXPECT_FALSE(all.WakeLoopOnSubmit(/*submitter_claims=*/true));
  EXPECT_TRUE(all.WakeLoopOnSubmit(/*submitter_claims=*/false));

  const CycleDriver crowded(true, true, /*ranks_outnumber_cores=*/true);
  EXPECT_TRUE(crowded.MayClaim(Who::kCaller));
  EXPECT_FALSE(crowded.MayClaim(Who::kKernel));

  for (const bool setting : {true, false}) {
    // Off by LOCKSTEP_CALLER_CYCLES=0, or MPI below MPI_THREAD_SERIALIZED: only the loop.
    const CycleDriver loop_only(setting, !setting, false);
    EXPECT_FALSE(loop_only.MayClaim(Who::kCaller));
    EXPECT_FALSE(loop_only.MayClaim(Who::kKernel));
    EXPECT_TRUE(loop_only.MayClaim(Who::kLoop));
    EXPECT_TRUE(loop_only.WakeLoopOnSubmit(/*submitter_claims=*/true));
  }
}

TEST(CycleDriverTest, AKernelLeavesUnorderedWorkInFlightToTheLoop) {
  KernelDrive in_order;
  KernelDrive unordered;
  unordered.only_when_idle = true;
  int asked = 0;
  const auto busy = [&] { return ++asked, true; };
  const auto idle = [&] { return ++asked, false; };
  EXPECT_TRUE(CycleDriver::KernelMayStay(in_order, busy));
  EXPECT_EQ(asked, 0);  // in-order kernels never ask what else is in flight
  EXPECT_TRUE(CycleDriver::KernelMayStay(unordered, idle));
  EXPECT_FALSE(CycleDriver::KernelMayStay(unordered, busy));
  EXPECT_EQ(asked, 2);
}

TEST(CycleDriverTest, ATurnSetsTheStateAndReleasingParks) {
  CycleDriver driver(true, true, false);
  EXPECT_EQ(driver.state(), State::kParked);
  {
    CycleDriver::Turn turn = driver.TryClaim(Who::kCaller);
    ASSERT_TRUE(turn);
    EXPECT_EQ(driver.state(), State::kCaller);
    EXPECT_TRUE(driver.caller_blocked());
    // Inside a cycle (a completion callback that waits), nobody claims again.
    EXPECT_FALSE(driver.MayClaim(Who::kCaller));
    EXPECT_FALSE(driver.TryClaim(Who::kKernel));
  }
  EXPECT_EQ(driver.state(), State::kParked);
  EXPECT_TRUE(driver.MayClaim(Who::kCaller));
  CycleDriver::Turn kernel = driver.TryClaim(Who::kKernel);
  ASSERT_TRUE(kernel);
  EXPECT_TRUE(driver.caller_blocked());
  kernel.Release();
  CycleDriver::Turn loop = driver.ClaimForLoop();
  ASSERT_TRUE(loop);
  EXPECT_EQ(driver.state(), State::kLoop);
  EXPECT_FALSE(driver.caller_blocked());  // the loop waits as the background does
}

TEST(CycleDriverTest, WhileOneThreadHoldsTheTurnOthersAreRefusedAndTheLoopWaits) {
  CycleDriver driver(true, true, false);
  CycleDriver::Turn caller = driver.TryClaim(Who::kCaller);
  ASSERT_TRUE(caller);
  std::atomic<bool> refused{false}, loop_has_it{false};
  std::thread other([&] {
    refused = !driver.TryClaim(Who::kCaller) && !driver.TryClaim(Who::kKernel);
    CycleDriver::Turn loop = driver.ClaimForLoop();  // waits for the caller to let go
    loop_has_it = static_cast<bool>(loop);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(loop_has_it.load());
  caller.Release();
  other.join();
  EXPECT_TRUE(refused.load());
  EXPECT_TRUE(loop_has_it.load());
  EXPECT_EQ(driver.state(), State::kParked);
}

TEST(CycleDriverTest, OnceStoppedEveryClaimIsRefused) {
  CycleDriver driver(true, true, false);
  {
    CycleDriver::Turn loop = driver.ClaimForLoop();
    driver.Stop();
    EXPECT_TRUE(driver.stopped());
  }
  EXPECT_TRUE(driver.stopped());
  EXPECT_FALSE(driver.ClaimForLoop());
  EXPECT_FALSE(driver.TryClaim(Who::kCaller));
  EXPECT_FALSE(driver.TryClaim(Who::kKernel));
}

TEST(CycleDriverTest, KernelCyclesCountUntilTheLoopRunsOne) {
  CycleDriver driver(true, true, false);
  {
    CycleDriver::Turn kernel = driver.TryClaim(Who::kKernel);
    driver.KernelFinishedItsOps();
  }
  {
    CycleDriver::Turn caller = driver.TryClaim(Who::kCaller);  // a caller's cycles keep it
  }
  EXPECT_TRUE(driver.kernel_cycles_only());
  CycleDriver::Turn loop = driver.ClaimForLoop();
  driver.LoopRunsCycle();
  EXPECT_FALSE(driver.kernel_cycles_only());
}

}  // namespace
}  // namespace lockstep
