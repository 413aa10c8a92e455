// The device-free decisions of the GPU path's failure handling: how long a collective
// has run (from its start, not from its queueing), what a failed communicator and a
// shutdown do with the communicator by what the loaded NCCL offers, and which device
// a set's GPU collectives are made on.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "backends/collective_deadlines.h"
#include "backends/gpu_agreement.h"
#include "engine/op_runner.h"

namespace lockstep {
namespace {

using Clock = CollectiveDeadlines::Clock;
using std::chrono::seconds;

TEST(CollectiveDeadlinesTest, TimeWaitingForInputsNeverCounts) {
  CollectiveDeadlines deadlines(10);
  deadlines.Add({"grad.0"});
  // Queued long ago but never started (its inputs are not ready): no timeout.
  EXPECT_EQ(deadlines.Expired(Clock::now() + seconds(3600)), "");
}

TEST(CollectiveDeadlinesTest, ACollectiveRunningPastTheTimeoutIsNamed) {
  CollectiveDeadlines deadlines(10);
  const auto t0 = Clock::now();
  const uint64_t a = deadlines.Add({"grad.0", "grad.1"});
  deadlines.Started(a, t0);
  EXPECT_EQ(deadlines.Expired(t0 + seconds(9)), "");
  const std::string why = deadlines.Expired(t0 + seconds(11));
  EXPECT_NE(why.find("'grad.0', 'grad.1'"), std::string::npos) << why;
  EXPECT_NE(why.find("within 10 s"), std::string::npos) << why;
  EXPECT_NE(why.find("LOCKSTEP_NCCL_TIMEOUT_SECONDS"), std::string::npos) << why;
}

TEST(CollectiveDeadlinesTest, TheFirstStartCountsAndFinishingRetiresEarlierOnes) {
  CollectiveDeadlines deadlines(5);
  const auto t0 = Clock::now();
  const uint64_t a = deadlines.Add({"a"});
  const uint64_t b = deadlines.Add({"b"});
  deadlines.Started(a, t0);
  deadlines.Started(a, t0 + seconds(4));  // seen again later: still started at t0
  EXPECT_NE(deadlines.Expired(t0 + seconds(6)), "");
  deadlines.Started(b, t0 + seconds(5));
  deadlines.Finished(b);  // stream order: a finished too
  EXPECT_TRUE(deadlines.empty());
  EXPECT_EQ(deadlines.Expired(t0 + seconds(60)), "");
}

TEST(CollectiveDeadlinesTest, ZeroNeverTimesOutAndPendingNamesAreInOrder) {
  CollectiveDeadlines deadlines(0);
  const uint64_t a = deadlines.Add({"a"});
  deadlines.Add({"b", "c"});
  deadlines.Started(a, Clock::now() - seconds(100000));
  EXPECT_EQ(deadlines.Expired(Clock::now()), "");
  EXPECT_EQ(deadlines.PendingNames(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(deadlines.size(), 2u);
}

TEST(GpuFailurePolicyTest, ACommunicatorFailureIsRevokedWhereNcclCanElseAbortedOnlyWhenSafe) {
  EXPECT_EQ(OnCommunicatorFailure(true, true), FailureAction::kRevokeDrainDestroy);
  EXPECT_EQ(OnCommunicatorFailure(true, false), FailureAction::kRevokeDrainDestroy);
  // NCCL 2.28: abort frees memory that kernels queued behind the hung one still use.
  EXPECT_EQ(OnCommunicatorFailure(false, true), FailureAction::kLeave);
  EXPECT_EQ(OnCommunicatorFailure(false, false), FailureAction::kAbort);
}

TEST(GpuFailurePolicyTest, ShutdownDestroysOnlyWhenEveryMemberDrained) {
  Agreement all;
  all.reached = true;
  all.all_ok = true;
  Agreement some = all;
  some.all_ok = false;
  Agreement none;  // the deadline passed (a member died)
  EXPECT_EQ(OnShutdown(all, false, true), ShutdownAction::kDestroy);
  EXPECT_EQ(OnShutdown(all, true, true), ShutdownAction::kDestroy);
  for (const Agreement& not_all : {some, none}) {
    // Never destroy (its host barrier would wait for a member that aborts or died).
    EXPECT_EQ(OnShutdown(not_all, true, false), ShutdownAction::kRevokeDrainDestroy);
    EXPECT_EQ(OnShutdown(not_all, false, true), ShutdownAction::kAbort);
    EXPECT_EQ(OnShutdown(not_all, false, false), ShutdownAction::kLeave);
  }
}

TEST(GpuFailurePolicyTest, DeadlinesOfZeroMeanNone) {
  EXPECT_EQ(DeadlineIn(0), AgreementClock::time_point::max());
  EXPECT_LT(DeadlineIn(1), AgreementClock::now() + seconds(2));
}

TEST(GpuDeviceForTest, ThisRanksTensorThenTheJoinDeviceThenTheBoundGpuThenZero) {
  TensorEntry on_two;
  on_two.spec.device = 2;
  EXPECT_EQ(OpRunner::GpuDeviceFor({nullptr, &on_two}, 3, 1), 2);
  EXPECT_EQ(OpRunner::GpuDeviceFor({nullptr}, 3, 1), 3)
      << "join(device=3) names where it stands in";
  EXPECT_EQ(OpRunner::GpuDeviceFor({nullptr}, -1, 1), 1);
  EXPECT_EQ(OpRunner::GpuDeviceFor({nullptr}, -1, -1), 0);
}

}  // namespace
}  // namespace lockstep
