// The controller's payload lane on the in-process transport, its data from the real
// PayloadLane (backends/host/payload_lane): when a lone small cached allreduce rides
// with the bits (every rank decides alike, from the reduced vector), what its reduced
// payload holds, and every case that must fall back to the data collective instead.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/host/payload_lane.h"
#include "engine/timeline.h"
#include "in_process_exchange.h"
#include "negotiation/controller.h"

namespace lockstep {
namespace {

Request Allreduce(int rank, const std::string& name, DataType dtype, ReduceOp op, int64_t count,
                  double prescale = 1.0) {
  Request r;
  r.rank = rank;
  r.op = OpType::kAllreduce;
  r.dtype = dtype;
  r.reduce_op = op;
  r.name = name;
  r.shape = {count};
  r.prescale = prescale;
  return r;
}

// `size` ranks, each a Controller on the in-process transport whose lane data comes
// from a PayloadLane over `inputs_[rank]`: host tensors' bytes, by name.
class LaneJob {
 public:
  explicit LaneJob(int size, int lane_bytes = 64) : hub_(size), inputs_(size) {
    Config config;
    config.negotiation_payload_bytes = lane_bytes;
    for (int rank = 0; rank < size; ++rank) {
      loggers_.push_back(std::make_unique<Logger>(LogLevel::kError, rank));
      Topology topology;
      topology.rank = rank;
      topology.size = size;
      controllers_.push_back(std::make_unique<Controller>(
          std::make_unique<InProcessExchange>(hub_, rank), topology, config, *loggers_.back()));
      lanes_.push_back(std::make_unique<PayloadLane>(
          topology, timeline_, [this, rank](const std::string& name) -> const OpSpec* {
            auto it = inputs_[rank].find(name);
            return it == inputs_[rank].end() ? nullptr : &it->second.spec;
          }));
      controllers_.back()->SetLaneSource(lanes_.back().get());
    }
  }
  const InProcessHub& hub() const { return hub_; }
  template <typename T>
  void SetInput(int rank, const std::string& name, std::vector<T> values, int device = -1) {
    Input& input = inputs_[rank][name];
    input.bytes.resize(values.size() * sizeof(T));
    std::memcpy(input.bytes.data(), values.data(), input.bytes.size());
    input.spec.input = input.bytes.data();
    input.spec.device = device;
  }

  // Every rank admits requests(rank) and runs one cycle; `joined` ranks say so.
  std::vector<NegotiationResult> Cycle(const std::function<std::vector<Request>(int)>& requests,
                                       const std::vector<bool>& joined = {}) {
    std::vector<NegotiationResult> results(controllers_.size());
    std::vector<std::thread> threads;
    for (size_t rank = 0; rank < controllers_.size(); ++rank) {
      threads.emplace_back([&, rank] {
        Controller& controller = *controllers_[rank];
        controller.Admit(requests(static_cast<int>(rank)));
        const bool is_joined = rank < joined.size() && joined[rank];
        results[rank] = controller.Negotiate(false, is_joined, true);
      });
    }
    for (auto& thread : threads) thread.join();
    return results;
  }
  // The same request (built per rank) on every rank.
  std::vector<NegotiationResult> Everyone(const std::function<Request(int)>& request) {
    return Cycle([&](int rank) { return std::vector<Request>{request(rank)}; });
  }

 private:
  struct Input {
    std::vector<uint8_t> bytes;
    OpSpec spec;  // its input: bytes
  };
  InProcessHub hub_;
  std::vector<std::map<std::string, Input>> inputs_;
  Timeline timeline_;  // never started: no phases recorded
  std::vector<std::unique_ptr<Logger>> loggers_;
  std::vector<std::unique_ptr<PayloadLane>> lanes_;
  std::vector<std::unique_ptr<Controller>> controllers_;
};

template <typename T>
std::vector<T> Payload(const NegotiationResult& result, size_t count) {
  std::vector<T> values(count);
  std::memcpy(values.data(), result.ridden_payload.data(), count * sizeof(T));
  return values;
}

void ExpectRode(const std::vector<NegotiationResult>& results, const std::string& name) {
  for (const auto& result : results) {
    ASSERT_NE(result.ridden, nullptr);
    EXPECT_TRUE(result.responses.empty());  // it runs no collective
    EXPECT_EQ(result.ridden->names.front(), name);
  }
}

void ExpectNoRide(const std::vector<NegotiationResult>& results) {
  for (const auto& result : results) EXPECT_EQ(result.ridden, nullptr);
}

TEST(ControllerLane, ALoneCachedAllreduceRidesWithTheBitsOnceCached) {
  LaneJob job(3);
  for (int rank = 0; rank < 3; ++rank) job.SetInput<int32_t>(rank, "x", {rank, -1, 100 * rank});
  auto x = [](int rank) { return Allreduce(rank, "x", DataType::kInt32, ReduceOp::kSum, 3); };
  auto first = job.Everyone(x);  // negotiated in full, then cached
  ExpectNoRide(first);
  EXPECT_EQ(first.front().responses.size(), 1u);
  auto second = job.Everyone(x);
  ExpectRode(second, "x");
  for (const auto& result : second) {
    EXPECT_EQ(Payload<int32_t>(result, 3), (std::vector<int32_t>{3, -3, 300}));
    EXPECT_EQ(result.cached_responses, 1);
  }
  EXPECT_EQ(job.hub().combine_rounds(), 2);
  EXPECT_EQ(job.hub().and_rounds(), 0);
  EXPECT_EQ(job.hub().gather_rounds(), 1);
}

TEST(ControllerLane, TheContributionIsPrescaledAsTheDataPathWouldScaleIt) {
  LaneJob job(2);
  job.SetInput<float>(0, "x", {1.0f, 3.0f});
  job.SetInput<float>(1, "x", {0.1f, -1.0f});
  auto x = [](int rank) {
    return Allreduce(rank, "x", DataType::kFloat32, ReduceOp::kAverage, 2, /*prescale=*/0.3);
  };
  job.Everyone(x);
  auto second = job.Everyone(x);
  ExpectRode(second, "x");
  const float f = static_cast<float>(0.3);
  const std::vector<float> expected{f * 1.0f + f * 0.1f, f * 3.0f + f * -1.0f};
  for (const auto& result : second) EXPECT_EQ(Payload<float>(result, 2), expected);
}

TEST(ControllerLane, FloatSumsRideAtTwoRanksOnlyMinAndIntegersAtAnyCount) {
  for (int size : {2, 3}) {
    LaneJob job(size);
    for (int rank = 0; rank < size; ++rank) {
      job.SetInput<float>(rank, "sum", {0.5f + rank});
      job.SetInput<float>(rank, "min", {0.5f + rank});
      job.SetInput<int64_t>(rank, "int", {1 + rank});
    }
    auto run = [&](const std::string& name, DataType dtype, ReduceOp op) {
      auto request = [&](int rank) { return Allreduce(rank, name, dtype, op, 1); };
      job.Everyone(request);
      return job.Everyone(request);
    };
    auto sum = run("sum", DataType::kFloat32, ReduceOp::kSum);
    if (size == 2) {
      ExpectRode(sum, "sum");
    } else {
      ExpectNoRide(sum);
      EXPECT_EQ(sum.front().responses.size(), 1u);  // it still runs, on the data path
    }
    ExpectRode(run("min", DataType::kFloat32, ReduceOp::kMin), "min");
    ExpectRode(run("int", DataType::kInt64, ReduceOp::kProduct), "int");
  }
}

TEST(ControllerLane, ARankSubmittingLateRidesInTheCycleEveryoneHasIt) {
  LaneJob job(2);
  job.SetInput<int32_t>(0, "x", {5});
  job.SetInput<int32_t>(1, "x", {7});
  auto x = [](int rank) { return Allreduce(rank, "x", DataType::kInt32, ReduceOp::kMax, 1); };
  job.Everyone(x);
  auto early = job.Cycle(
      [&](int rank) { return rank == 0 ? std::vector<Request>{x(rank)} : std::vector<Request>{}; });
  for (const auto& result : early) {
    EXPECT_TRUE(result.responses.empty());
    EXPECT_EQ(result.ridden, nullptr);
  }
  auto late = job.Cycle(
      [&](int rank) { return rank == 1 ? std::vector<Request>{x(rank)} : std::vector<Request>{}; });
  ExpectRode(late, "x");
  for (const auto& result : late) EXPECT_EQ(Payload<int32_t>(result, 1), std::vector<int32_t>{7});
}

TEST(ControllerLane, RanksCarryingDifferentTensorsFallBack) {
  LaneJob job(2);
  for (int rank = 0; rank < 2; ++rank) {
    job.SetInput<int32_t>(rank, "a", {1});
    job.SetInput<int32_t>(rank, "b", {2});
  }
  auto op = [](int rank, const std::string& name) {
    return Allreduce(rank, name, DataType::kInt32, ReduceOp::kSum, 1);
  };
  job.Cycle([&](int rank) { return std::vector<Request>{op(rank, "a"), op(rank, "b")}; });
  // Rank 0 carries a, rank 1 carries b: neither is ready everywhere, the lane empties.
  auto crossed =
      job.Cycle([&](int rank) { return std::vector<Request>{op(rank, rank == 0 ? "a" : "b")}; });
  for (const auto& result : crossed) {
    EXPECT_TRUE(result.responses.empty());
    EXPECT_EQ(result.ridden, nullptr);
  }
  // Then both have both: two ready at once share the data path (fused), none rides.
  auto both =
      job.Cycle([&](int rank) { return std::vector<Request>{op(rank, rank == 0 ? "b" : "a")}; });
  ExpectNoRide(both);
  for (const auto& result : both) EXPECT_EQ(result.responses.size(), 2u);
}

TEST(ControllerLane, NothingRidesThatTheLaneCannotCarryExactly) {
  LaneJob job(2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  job.SetInput<float>(0, "nan", {1.0f});
  job.SetInput<float>(1, "nan", {nan});
  job.SetInput<float>(0, "zero", {-0.0f});
  job.SetInput<float>(1, "zero", {0.0f});
  for (int rank = 0; rank < 2; ++rank) {
    job.SetInput<float>(rank, "big", std::vector<float>(17, 1.0f));
    job.SetInput<float>(rank, "full", std::vector<float>(16, 1.0f + rank));
  }
  struct Case {
    std::string name;
    ReduceOp op;
    int64_t count;
    bool rides;
  };
  for (const Case& c :
       {Case{"nan", ReduceOp::kSum, 1, false}, Case{"zero", ReduceOp::kMax, 1, false},
        Case{"zero", ReduceOp::kSum, 1, true},  // -0 + 0 is +0 either way
        Case{"big", ReduceOp::kSum, 17, false}, Case{"full", ReduceOp::kSum, 16, true},
        Case{"full", ReduceOp::kAdasum, 16, false},
        Case{"unknown", ReduceOp::kSum, 1, false}}) {  // no input found
    auto request = [&](int rank) {
      return Allreduce(rank, c.name, DataType::kFloat32, c.op, c.count);
    };
    job.Everyone(request);
    auto results = job.Everyone(request);
    for (const auto& result : results) {
      // A ridden response runs no collective, so it is not among the responses.
      EXPECT_EQ(result.responses.size() + (result.ridden != nullptr ? 1 : 0), 1u) << c.name;
      EXPECT_EQ(result.ridden != nullptr, c.rides) << c.name;
    }
  }
}

TEST(ControllerLane, ATensorOnAGpuOnOneRankMeansNoRide) {
  LaneJob job(2);
  job.SetInput<int32_t>(0, "x", {1});
  job.SetInput<int32_t>(1, "x", {1}, /*device=*/0);  // its data is not in host memory
  auto x = [](int rank) { return Allreduce(rank, "x", DataType::kInt32, ReduceOp::kSum, 1); };
  job.Everyone(x);
  auto results = job.Everyone(x);
  ExpectNoRide(results);
  EXPECT_EQ(results.front().responses.size(), 1u);
}

TEST(ControllerLane, AJoinedRankMeansNoRide) {
  LaneJob job(2);
  job.SetInput<int32_t>(0, "x", {1});
  job.SetInput<int32_t>(1, "x", {1});
  auto x = [](int rank) { return Allreduce(rank, "x", DataType::kInt32, ReduceOp::kSum, 1); };
  job.Everyone(x);
  auto results = job.Cycle([&](int rank) { return std::vector<Request>{x(rank)}; },
                           /*joined=*/{false, true});
  ExpectNoRide(results);
}

TEST(ControllerLane, WithoutALaneTheBitsGoByAndAlone) {
  LaneJob job(2, /*lane_bytes=*/0);
  job.SetInput<int32_t>(0, "x", {1});
  job.SetInput<int32_t>(1, "x", {1});
  auto x = [](int rank) { return Allreduce(rank, "x", DataType::kInt32, ReduceOp::kSum, 1); };
  job.Everyone(x);
  auto results = job.Everyone(x);
  ExpectNoRide(results);
  EXPECT_EQ(results.front().responses.size(), 1u);
  EXPECT_EQ(job.hub().and_rounds(), 2);
  EXPECT_EQ(job.hub().combine_rounds(), 0);
}

}  // namespace
}  // namespace lockstep
