// The payload lane's data on one rank (backends/host/payload_lane): what Fill writes
// for negotiation (the prescaled input) and when it refuses, and how Finish turns the
// reduced payload into the op's result (postscale and Average's division, as the host
// collectives finish theirs). Across ranks: test_controller_lane.cc, test_cycle_lane.cc
// and, under mpirun, tests/python/test_payload_lane.py.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backends/host/payload_lane.h"
#include "engine/timeline.h"

namespace lockstep {
namespace {

Response Allreduce(DataType dtype, ReduceOp op, int64_t count, double prescale = 1.0,
                   double postscale = 1.0) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.dtype = dtype;
  r.reduce_op = op;
  r.names = {"x"};
  r.sizes = {count};
  r.shape = {count};
  r.prescale = prescale;
  r.postscale = postscale;
  return r;
}

class PayloadLaneTest : public ::testing::Test {
 protected:
  PayloadLane Lane(int size) {
    Topology topology;
    topology.rank = 0;
    topology.size = size;
    return PayloadLane(topology, timeline_, [this](const std::string& name) -> const OpSpec* {
      auto it = specs_.find(name);
      return it == specs_.end() ? nullptr : &it->second;
    });
  }
  Timeline timeline_;  // never started
  std::map<std::string, OpSpec> specs_;
};

TEST_F(PayloadLaneTest, FillWritesThePrescaledInputAndLeavesTheInputAlone) {
  const std::vector<int32_t> input{7, -7, 100};
  specs_["x"].input = input.data();
  PayloadLane lane = Lane(3);
  std::vector<int32_t> payload(3);
  ASSERT_TRUE(lane.Fill(Allreduce(DataType::kInt32, ReduceOp::kSum, 3, 0.5), "x", payload.data()));
  EXPECT_EQ(payload, (std::vector<int32_t>{3, -3, 50}));  // Horovod's: truncated toward zero
  EXPECT_EQ(input, (std::vector<int32_t>{7, -7, 100}));
}

TEST_F(PayloadLaneTest, FillRefusesWhatCannotRide) {
  const std::vector<float> one{1.5f};
  specs_["host"].input = one.data();
  specs_["gpu"].input = one.data();
  specs_["gpu"].device = 0;
  PayloadLane two = Lane(2), three = Lane(3);
  float payload = 0;
  const Response sum = Allreduce(DataType::kFloat32, ReduceOp::kSum, 1);
  EXPECT_TRUE(two.Fill(sum, "host", &payload));
  EXPECT_FALSE(two.Fill(sum, "gpu", &payload));      // not in host memory
  EXPECT_FALSE(two.Fill(sum, "missing", &payload));  // no op by that name here
  // At 3 ranks a float sum's result could depend on the order MPI combines in.
  EXPECT_FALSE(three.Fill(sum, "host", &payload));
  EXPECT_TRUE(three.Fill(Allreduce(DataType::kFloat32, ReduceOp::kMax, 1), "host", &payload));
}

TEST_F(PayloadLaneTest, FinishPostscalesAndDividesAverageBySize) {
  std::vector<float> output(2, 0.0f);
  OpSpec spec;
  spec.output = output.data();
  spec.shape = {2};
  const std::vector<float> reduced{4.0f, 8.0f};
  PayloadLane lane = Lane(4);
  std::vector<LocalTensor> tensors(1);
  tensors[0].spec = &spec;
  auto results = lane.Finish(Allreduce(DataType::kFloat32, ReduceOp::kAverage, 2, 1.0, 2.0),
                             tensors, reduced.data());
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(output, (std::vector<float>{2.0f, 4.0f}));
  lane.Finish(Allreduce(DataType::kFloat32, ReduceOp::kSum, 2), tensors, reduced.data());
  EXPECT_EQ(output, reduced);
}

TEST_F(PayloadLaneTest, FinishRefusesAnythingButOneLocalAllreduce) {
  PayloadLane lane = Lane(2);
  const float reduced = 1.0f;
  std::vector<LocalTensor> joined(1);  // no local tensor
  EXPECT_THROW(lane.Finish(Allreduce(DataType::kFloat32, ReduceOp::kSum, 1), joined, &reduced),
               Error);
  Response broadcast = Allreduce(DataType::kFloat32, ReduceOp::kSum, 1);
  broadcast.type = ResponseType::kBroadcast;
  float out = 0;
  OpSpec spec;
  spec.output = &out;
  std::vector<LocalTensor> tensors(1);
  tensors[0].spec = &spec;
  EXPECT_THROW(lane.Finish(broadcast, tensors, &reduced), Error);
}

}  // namespace
}  // namespace lockstep
