// The engine loop (background thread, negotiation, fusion, op runner, handles) of
// several ranks in one process, on the in-process transport: results, the cached
// path, a mismatch failing on every rank, and shutdown reaching every rank. The same
// over MPI is tested under mpirun.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "in_process_transport.h"

namespace lockstep {
namespace {

Config TestConfig() {
  Config config;
  config.peer_timeout_seconds = 0;  // no watchdog: the in-process job cannot be aborted
  config.stall_check_disabled = true;
  config.shm_allreduce_min_ranks = 0;
  return config;
}

class InProcessJob {
 public:
  // callers_may_drive: the transport may be called from any thread (one at a time),
  // as MPI_THREAD_SERIALIZED allows, so callers run cycles themselves.
  explicit InProcessJob(int size, const Config& config = TestConfig(),
                        bool callers_may_drive = false)
      : hub_(size), handles_(size), namers_(size) {
    for (int rank = 0; rank < size; ++rank) {
      World world = InProcessWorld(hub_, rank);
      world.any_thread_may_call = callers_may_drive;
      engines_.push_back(
          std::make_unique<Engine>(std::move(world), config, handles_[rank], namers_[rank]));
    }
  }
  // Every rank shuts down at about the same time, as a job's processes do at exit: one
  // rank's shutdown waits for the others' next cycle, and their loops may be parked
  // for up to 32 cycle times.
  ~InProcessJob() {
    std::vector<std::thread> stopping;
    for (auto& engine : engines_) stopping.emplace_back([&engine] { engine.reset(); });
    for (auto& thread : stopping) thread.join();
  }
  InProcessJob(const InProcessJob&) = delete;
  InProcessJob& operator=(const InProcessJob&) = delete;

  int size() const { return hub_.size(); }
  const InProcessHub& hub() const { return hub_; }
  Engine& engine(int rank) { return *engines_.at(rank); }
  HandleTable& handles(int rank) { return handles_.at(rank); }

  // Every rank submits spec(rank); returns each rank's result or error message.
  struct Outcome {
    OpResult result;
    std::string error;
  };
  std::vector<Outcome> RunEverywhere(const std::function<OpSpec(int)>& spec) {
    std::vector<Handle> handles;
    for (int rank = 0; rank < size(); ++rank) {
      std::vector<OpSpec> one{spec(rank)};
      handles.push_back(engine(rank).Enqueue(std::move(one), false).front());
    }
    std::vector<Outcome> outcomes(size());
    for (int rank = 0; rank < size(); ++rank) {
      try {
        outcomes[rank].result = handles_[rank].Wait(handles[rank]);
      } catch (const Error& e) {
        outcomes[rank].error = e.what();
      }
    }
    return outcomes;
  }

 private:
  InProcessHub hub_;
  std::vector<HandleTable> handles_;
  std::vector<OpNamer> namers_;
  std::vector<std::unique_ptr<Engine>> engines_;
};

TEST(EngineLoop, AllreduceGivesEveryRankTheSumAndTheSecondTimeComesFromTheCache) {
  InProcessJob job(3);
  std::vector<std::vector<float>> inputs(3), outputs(3, std::vector<float>(4));
  for (int rank = 0; rank < 3; ++rank) inputs[rank] = {1.0f * rank, 1, 2, -1.0f * rank};
  auto spec = [&](int rank) {
    OpSpec s;
    s.name = "grad";
    s.reduce_op = ReduceOp::kSum;
    s.shape = {4};
    s.input = inputs[rank].data();
    s.output = outputs[rank].data();
    return s;
  };
  for (int step = 0; step < 2; ++step) {
    for (const auto& outcome : job.RunEverywhere(spec)) EXPECT_EQ(outcome.error, "");
    for (int rank = 0; rank < 3; ++rank) {
      EXPECT_EQ(outputs[rank], (std::vector<float>{3, 3, 6, -3})) << "rank " << rank;
    }
  }
  for (int rank = 0; rank < 3; ++rank) {
    const EngineStats stats = job.engine(rank).stats();
    EXPECT_EQ(stats.negotiated_responses, 1) << "rank " << rank;
    EXPECT_EQ(stats.cached_responses, 1) << "rank " << rank;
  }
}

TEST(EngineLoop, ALoneSmallCachedAllreduceRidesWithTheBitsAndFinishesLikeTheDataPath) {
  Config config = TestConfig();
  config.negotiation_payload_bytes = 64;
  InProcessJob job(2, config);
  std::vector<std::vector<int32_t>> inputs = {{7, -3, 100}, {5, 9, -1}};
  std::vector<std::vector<int32_t>> outputs(2, std::vector<int32_t>(3));
  auto spec = [&](int rank) {
    OpSpec s;
    s.name = "metric";
    s.dtype = DataType::kInt32;
    s.reduce_op = ReduceOp::kAverage;  // Sum, then postscale / size, truncated
    s.prescale = 2.0;
    s.postscale = 1.5;
    s.shape = {3};
    s.input = inputs[rank].data();
    s.output = outputs[rank].data();
    return s;
  };
  // (2a + 2b) * 1.5 / 2, truncated toward zero.
  const std::vector<int32_t> expected = {18, 9, 148};
  for (const auto& outcome : job.RunEverywhere(spec)) EXPECT_EQ(outcome.error, "");
  for (int rank = 0; rank < 2; ++rank) EXPECT_EQ(outputs[rank], expected) << "rank " << rank;
  const int data_rounds = job.hub().data_rounds();
  EXPECT_GE(data_rounds, 1);  // the first time, negotiated in full, with its collective
  for (int rank = 0; rank < 2; ++rank) outputs[rank].assign(3, 0);
  for (const auto& outcome : job.RunEverywhere(spec)) EXPECT_EQ(outcome.error, "");
  for (int rank = 0; rank < 2; ++rank) EXPECT_EQ(outputs[rank], expected) << "rank " << rank;
  EXPECT_EQ(job.hub().data_rounds(), data_rounds);  // the second time it rode
  EXPECT_GE(job.hub().combine_rounds(), 2);
}

TEST(EngineLoop, AllgatherOfUnevenRowsAndBroadcast) {
  InProcessJob job(3);
  std::vector<std::vector<int32_t>> rows(3);
  for (int rank = 0; rank < 3; ++rank) rows[rank].assign(rank + 1, rank);
  auto gathered = job.RunEverywhere([&](int rank) {
    OpSpec s;
    s.op = OpType::kAllgather;
    s.name = "rows";
    s.dtype = DataType::kInt32;
    s.shape = {rank + 1};
    s.input = rows[rank].data();
    return s;
  });
  for (const auto& outcome : gathered) {
    ASSERT_EQ(outcome.error, "");
    const auto* data = static_cast<const int32_t*>(outcome.result.buffer->data());
    EXPECT_EQ(std::vector<int32_t>(data, data + 6), (std::vector<int32_t>{0, 1, 1, 2, 2, 2}));
  }
  std::vector<std::vector<double>> values(3);
  for (int rank = 0; rank < 3; ++rank) values[rank] = {1.0 * rank, 2.0 * rank};
  auto broadcast = job.RunEverywhere([&](int rank) {
    OpSpec s;
    s.op = OpType::kBroadcast;
    s.name = "weights";
    s.dtype = DataType::kFloat64;
    s.shape = {2};
    s.input = s.output = values[rank].data();
    s.root_rank = 2;
    return s;
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(broadcast[rank].error, "");
    EXPECT_EQ(values[rank], (std::vector<double>{2, 4})) << "rank " << rank;
  }
}

TEST(EngineLoop, MismatchedDtypesFailOnEveryRank) {
  InProcessJob job(2);
  std::vector<double> buffer(4, 1.0);
  auto outcomes = job.RunEverywhere([&](int rank) {
    OpSpec s;
    s.name = "mixed";
    s.dtype = rank == 0 ? DataType::kFloat32 : DataType::kFloat64;
    s.shape = {2};
    s.input = s.output = buffer.data() + 2 * rank;
    return s;
  });
  for (const auto& outcome : outcomes) {
    EXPECT_NE(outcome.error.find("mixed"), std::string::npos) << outcome.error;
  }
}

TEST(EngineLoop, ShutdownOnOneRankStopsEveryRank) {
  InProcessJob job(3);
  job.engine(1).Shutdown();
  for (int rank = 0; rank < 3; ++rank) {
    for (int tries = 0; tries < 500 && job.engine(rank).running(); ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_FALSE(job.engine(rank).running()) << "rank " << rank;
    EXPECT_NE(job.engine(rank).stop_reason().find("shut down"), std::string::npos);
  }
}

// A rank with nothing pending while another waits for it (the others are ahead, it is
// still computing) cycles at the longest idle interval, not every cycle_time: the work
// it submits starts a cycle at once, and each earlier cycle would only wake the waiting
// ranks to start their wait over. A bound on cycles, not on time: load only lowers it.
TEST(EngineLoop, ARankBehindDoesNotCycleEveryCycleTimeWhileOthersWaitForIt) {
  InProcessJob job(2);
  std::vector<float> inputs{1, 2}, outputs(2);
  auto spec = [&](int rank) {
    OpSpec s;
    s.name = "late";
    s.reduce_op = ReduceOp::kSum;
    s.shape = {1};
    s.input = &inputs[rank];
    s.output = &outputs[rank];
    return s;
  };
  std::vector<OpSpec> first{spec(0)};
  const Handle early = job.engine(0).Enqueue(std::move(first), false).front();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 is waiting now
  const int64_t before = job.engine(1).stats().cycles;
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const int64_t cycles = job.engine(1).stats().cycles - before;
  // cycle_time is 1 ms: ~400 cycles before; the longest idle interval is 16 ms (~25).
  EXPECT_LE(cycles, 80);
  std::vector<OpSpec> second{spec(1)};
  const Handle late = job.engine(1).Enqueue(std::move(second), false).front();
  job.handles(0).Wait(early);
  job.handles(1).Wait(late);
  EXPECT_EQ(outputs, (std::vector<float>{3, 3}));
}

// EnqueueAndDrive, as a framework kernel calls it: what a callback saw.
struct CallbackRecord {
  std::atomic<bool> ran{false};
  std::thread::id thread;
  std::string error;
};

DoneCallback Recording(CallbackRecord& record) {
  return [&record](const Status& status, OpResult) {
    record.thread = std::this_thread::get_id();
    record.error = status.ok() ? "" : status.message();
    record.ran = true;
  };
}

// Whether the callback has run, or does within `seconds` (on the background thread).
bool RunsWithinSeconds(const CallbackRecord& record, int seconds) {
  for (int tries = 0; tries < seconds * 100 && !record.ran; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return record.ran;
}

OpSpec SumOf(const std::string& name, float* input, float* output) {
  OpSpec s;
  s.name = name;
  s.reduce_op = ReduceOp::kSum;
  s.shape = {1};
  s.input = input;
  s.output = output;
  return s;
}

// Ranks that submit together run the cycles on their own threads and finish there:
// each callback has run, on the submitting thread, when EnqueueAndDrive returns. The
// background loops stay parked (a long cycle_time), so no thread but the callers'
// could have run the cycles.
TEST(EngineLoop, OpsSubmittedTogetherFinishOnTheSubmittingThreadBeforeEnqueueAndDriveReturns) {
  Config config = TestConfig();
  config.cycle_time_ms = 500;
  InProcessJob job(2, config, /*callers_may_drive=*/true);
  std::vector<float> inputs{1, 2}, outputs(2);
  // The loops' first cycles, then they park for cycle_time.
  job.RunEverywhere([&](int rank) { return SumOf("warm-up", &inputs[rank], &outputs[rank]); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int round = 0; round < 5; ++round) {  // negotiated in full, then from the cache
    std::vector<CallbackRecord> records(2);
    std::vector<std::thread::id> callers(2);
    std::vector<char> ran_before_return(2);  // not vector<bool>: two threads write it
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      ranks.emplace_back([&, rank] {
        callers[rank] = std::this_thread::get_id();
        std::vector<OpSpec> specs{SumOf("together", &inputs[rank], &outputs[rank])};
        std::vector<DoneCallback> callbacks{Recording(records[rank])};
        job.engine(rank).EnqueueAndDrive(std::move(specs), false, std::move(callbacks),
                                         KernelDrive{std::chrono::seconds(60)});
        ran_before_return[rank] = records[rank].ran;
      });
    }
    for (auto& thread : ranks) thread.join();
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(ran_before_return[rank]) << "rank " << rank << ", round " << round;
      EXPECT_EQ(records[rank].thread, callers[rank]) << "rank " << rank << ", round " << round;
      EXPECT_EQ(records[rank].error, "");
    }
    EXPECT_EQ(outputs, (std::vector<float>{3, 3})) << "round " << round;
  }
}

// A rank whose peer has not submitted gives up driving after its budget (plus the one
// cycle that waits for the peer's next idle cycle): the op then finishes on the
// background thread once the peer submits.
TEST(EngineLoop, EnqueueAndDriveReturnsAfterItsBudgetWhenAPeerIsLate) {
  InProcessJob job(2, TestConfig(), /*callers_may_drive=*/true);
  std::vector<float> inputs{1, 2}, outputs(2);
  CallbackRecord early;
  std::vector<OpSpec> specs{SumOf("late peer", &inputs[0], &outputs[0])};
  std::vector<DoneCallback> callbacks{Recording(early)};
  const auto started = std::chrono::steady_clock::now();
  job.engine(0).EnqueueAndDrive(std::move(specs), false, std::move(callbacks),
                                KernelDrive{std::chrono::milliseconds(1)});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_FALSE(early.ran);  // rank 1 has not submitted yet: it cannot have finished
  EXPECT_LT(took, std::chrono::seconds(5));
  std::vector<OpSpec> late{SumOf("late peer", &inputs[1], &outputs[1])};
  job.handles(1).Wait(job.engine(1).Enqueue(std::move(late), false).front());
  ASSERT_TRUE(RunsWithinSeconds(early, 5));
  EXPECT_NE(early.thread, std::this_thread::get_id());
  EXPECT_EQ(early.error, "");
  EXPECT_EQ(outputs, (std::vector<float>{3, 3}));
}

// Submits `name` on `rank` through EnqueueAndDrive with a budget far beyond the test's
// patience, so only `drive`'s other limits can make it return early. How long it took.
std::chrono::steady_clock::duration DriveFor(InProcessJob& job, int rank, const std::string& name,
                                             KernelDrive drive, float* input, float* output,
                                             CallbackRecord& record) {
  drive.budget = std::chrono::seconds(60);
  std::vector<OpSpec> specs{SumOf(name, input, output)};
  std::vector<DoneCallback> callbacks{Recording(record)};
  const auto started = std::chrono::steady_clock::now();
  job.engine(rank).EnqueueAndDrive(std::move(specs), false, std::move(callbacks), drive);
  return std::chrono::steady_clock::now() - started;
}

// max_cycles bounds the drive whatever its budget: with the peer not submitting, one
// cycle (which waits for the peer's next idle cycle) and the caller's thread is free.
TEST(EngineLoop, EnqueueAndDriveStopsAfterMaxCycles) {
  InProcessJob job(2, TestConfig(), /*callers_may_drive=*/true);
  std::vector<float> inputs{1, 2}, outputs(2);
  CallbackRecord early;
  KernelDrive one_cycle;
  one_cycle.max_cycles = 1;
  const auto took = DriveFor(job, 0, "one cycle", one_cycle, &inputs[0], &outputs[0], early);
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_FALSE(early.ran);
  std::vector<OpSpec> late{SumOf("one cycle", &inputs[1], &outputs[1])};
  job.handles(1).Wait(job.engine(1).Enqueue(std::move(late), false).front());
  ASSERT_TRUE(RunsWithinSeconds(early, 5));
  EXPECT_EQ(outputs, (std::vector<float>{3, 3}));
}

// only_when_idle: with another op of this rank still in flight, the caller does not
// drive at all (it would wait for a rank that submits that other op first), and the
// loop finishes both once the peer submits them, in the other order.
TEST(EngineLoop, EnqueueAndDriveOnlyWhenIdleLeavesOpsBehindOthersToTheLoop) {
  InProcessJob job(2, TestConfig(), /*callers_may_drive=*/true);
  std::vector<float> inputs{1, 2}, first_out(2), second_out(2);
  std::vector<OpSpec> first{SumOf("first", &inputs[0], &first_out[0])};
  const Handle first_handle = job.engine(0).Enqueue(std::move(first), false).front();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // admitted: pending
  CallbackRecord second;
  KernelDrive when_idle;
  when_idle.only_when_idle = true;
  const auto took = DriveFor(job, 0, "second", when_idle, &inputs[0], &second_out[0], second);
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_FALSE(second.ran);
  std::vector<OpSpec> peer{SumOf("second", &inputs[1], &second_out[1]),
                           SumOf("first", &inputs[1], &first_out[1])};
  for (Handle handle : job.engine(1).Enqueue(std::move(peer), false)) job.handles(1).Wait(handle);
  job.handles(0).Wait(first_handle);
  ASSERT_TRUE(RunsWithinSeconds(second, 5));
  EXPECT_NE(second.thread, std::this_thread::get_id());
  EXPECT_EQ(second.error, "");
  EXPECT_EQ(first_out, (std::vector<float>{3, 3}));
  EXPECT_EQ(second_out, (std::vector<float>{3, 3}));
}

// Kernels that finish their own ops (a tf.function or jitted step in a loop) cycle
// often enough: the loops then wait the longest idle stretch (32 cycle times) instead of
// waking every cycle time to find that a kernel cycled meanwhile. Where the loop ran
// the last cycle itself, its idle cycles come 1, 2, 4, 8... cycle times apart.
TEST(EngineLoop, AfterKernelsFinishTheirOwnOpsIdleCyclesWaitTheLongestStretch) {
  Config config = TestConfig();
  config.cycle_time_ms = 10;
  const auto idle_cycles_in = [](InProcessJob& job, std::chrono::milliseconds span) {
    const int64_t before = job.engine(0).stats().cycles;
    std::this_thread::sleep_for(span);
    return job.engine(0).stats().cycles - before;
  };
  std::vector<float> inputs{1, 2}, outputs(2);
  {
    InProcessJob job(2, config, /*callers_may_drive=*/true);
    // A drive that finds a loop in its own idle cycle leaves the op to it: try again
    // until both ranks' kernels finished their op inside their drives.
    bool both_inside = false;
    for (int attempt = 0; attempt < 20 && !both_inside; ++attempt) {
      std::vector<CallbackRecord> records(2);
      std::vector<char> inside(2);  // not vector<bool>: two threads write it
      std::vector<std::thread> ranks;
      for (int rank = 0; rank < 2; ++rank) {
        ranks.emplace_back([&, rank] {
          const std::string name = "driven." + std::to_string(attempt);
          std::vector<OpSpec> specs{SumOf(name, &inputs[rank], &outputs[rank])};
          std::vector<DoneCallback> callbacks{Recording(records[rank])};
          job.engine(rank).EnqueueAndDrive(std::move(specs), false, std::move(callbacks),
                                           KernelDrive{std::chrono::seconds(60)});
          inside[rank] = records[rank].ran;
        });
      }
      for (auto& thread : ranks) thread.join();
      for (auto& record : records) ASSERT_TRUE(RunsWithinSeconds(record, 5));
      both_inside = inside[0] && inside[1];
    }
    ASSERT_TRUE(both_inside);
    EXPECT_LE(idle_cycles_in(job, std::chrono::milliseconds(200)), 1);
  }
  InProcessJob job(2, config, /*callers_may_drive=*/false);
  job.RunEverywhere([&](int rank) { return SumOf("looped", &inputs[rank], &outputs[rank]); });
  EXPECT_GE(idle_cycles_in(job, std::chrono::milliseconds(200)), 3);
}

// Ops enqueued without waking the loop (the caller means to run their cycle itself)
// still start at once where callers may not run cycles: the loop is woken all the
// same, instead of finding them at its next idle cycle (here 500 ms or more away).
TEST(EngineLoop, OpsEnqueuedWithoutWakingTheLoopStartAtOnceWhereCallersCannotDrive) {
  Config config = TestConfig();
  config.cycle_time_ms = 500;
  InProcessJob job(2, config, /*callers_may_drive=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // both loops parked
  std::vector<float> inputs{1, 2}, outputs(2);
  const auto started = std::chrono::steady_clock::now();
  std::vector<Handle> handles;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<OpSpec> one{SumOf("unwoken", &inputs[rank], &outputs[rank])};
    handles.push_back(
        job.engine(rank).Enqueue(std::move(one), false, {}, /*wake_loop=*/false).front());
  }
  for (int rank = 0; rank < 2; ++rank) job.handles(rank).Wait(handles[rank]);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(250));
  EXPECT_EQ(outputs, (std::vector<float>{3, 3}));
}

}  // namespace
}  // namespace lockstep
