// Argument checks on the caller's thread: every rejection names the tensor and the
// problem; valid specs of every kind pass; RequestFromSpec copies what it should.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "submit/spec_validation.h"

namespace lockstep {
namespace {

class SpecValidationTest : public ::testing::Test {
 protected:
  SpecValidationTest() { topology_.size = 4; }

  // A valid spec of kind `op` on an 8 x 2 float32 tensor named "t".
  OpSpec Valid(OpType op) {
    OpSpec spec;
    spec.op = op;
    spec.name = "t";
    spec.shape = {8, 2};
    spec.input = data_.data();
    spec.output = data_.data();
    spec.reduce_op = ReduceOp::kSum;
    return spec;
  }

  // The message of the Error ValidateSpec throws, or a failure if it does not throw or
  // throws it with another code.
  ::testing::AssertionResult Rejects(const OpSpec& spec, const std::string& problem,
                                     const std::string& gpu_unavailable = "no GPU here",
                                     Status::Code code = Status::Code::kInvalidArgument) {
    try {
      ValidateSpec(spec, topology_, gpu_unavailable);
    } catch (const Error& error) {
      const std::string message = error.what();
      // An op without a name is named by its kind alone ("allreduce: ...").
      const std::string named =
          spec.name.empty() ? std::string(OpTypeName(spec.op)) + ": " : "'" + spec.name + "'";
      if (message.find(named) == std::string::npos || message.find(problem) == std::string::npos) {
        return ::testing::AssertionFailure() << "wrong message: " << message;
      }
      if (error.code() != code) {
        return ::testing::AssertionFailure()
               << "wrong code " << static_cast<int>(error.code()) << " for: " << message;
      }
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "accepted, expected '" << problem << "'";
  }

  ::testing::AssertionResult RejectsAs(Status::Code code, const OpSpec& spec,
                                       const std::string& problem) {
    return Rejects(spec, problem, "no GPU here", code);
  }

  ::testing::AssertionResult Accepts(const OpSpec& spec,
                                     const std::string& gpu_unavailable = "no GPU here") {
    try {
      ValidateSpec(spec, topology_, gpu_unavailable);
    } catch (const Error& error) {
      return ::testing::AssertionFailure() << "rejected: " << error.what();
    }
    return ::testing::AssertionSuccess();
  }

  Topology topology_;
  std::vector<float> data_ = std::vector<float>(16);
};

TEST_F(SpecValidationTest, ValidSpecsPass) {
  for (OpType op : {OpType::kAllreduce, OpType::kAllgather, OpType::kBroadcast, OpType::kAlltoall,
                    OpType::kReducescatter, OpType::kBarrier}) {
    EXPECT_TRUE(Accepts(Valid(op))) << OpTypeName(op);
  }
  OpSpec spec = Valid(OpType::kAllreduce);
  for (ReduceOp op :
       {ReduceOp::kAverage, ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    spec.reduce_op = op;
    EXPECT_TRUE(Accepts(spec)) << ReduceOpName(op);
  }
  spec = Valid(OpType::kReducescatter);
  spec.reduce_op = ReduceOp::kAverage;
  spec.prescale = 0.5;
  EXPECT_TRUE(Accepts(spec));

  spec = Valid(OpType::kAllreduce);
  spec.shape = {};  // a scalar
  EXPECT_TRUE(Accepts(spec));
  spec.shape = {0, 3};  // empty: no memory needed
  spec.input = nullptr;
  spec.output = nullptr;
  EXPECT_TRUE(Accepts(spec));

  spec = Valid(OpType::kAllgather);
  spec.output = nullptr;  // the core allocates allgather results
  EXPECT_TRUE(Accepts(spec));

  spec = Valid(OpType::kBroadcast);
  spec.root_rank = 3;
  EXPECT_TRUE(Accepts(spec));

  spec = Valid(OpType::kAlltoall);
  spec.splits = {1, 2, 0, 5};
  EXPECT_TRUE(Accepts(spec));

  spec = Valid(OpType::kAllreduce);
  spec.dtype = DataType::kBool;
  spec.reduce_op = ReduceOp::kMax;
  EXPECT_TRUE(Accepts(spec));

  spec = Valid(OpType::kAllreduce);
  spec.device = 0;
  EXPECT_TRUE(Accepts(spec, /*gpu_unavailable=*/""));

  OpSpec barrier;  // no tensor at all
  barrier.op = OpType::kBarrier;
  barrier.name = "barrier";
  EXPECT_TRUE(Accepts(barrier));

  OpSpec join;
  join.op = OpType::kJoin;  // join needs no name
  EXPECT_TRUE(Accepts(join));
}

TEST_F(SpecValidationTest, RejectsBadShapesAndMemory) {
  OpSpec spec = Valid(OpType::kAllreduce);
  spec.shape = {2, -1};
  EXPECT_TRUE(Rejects(spec, "negative dimension"));

  // Byte counts that would wrap around int64 (the product of the dimensions alone fits).
  spec.shape = {int64_t{1} << 31, int64_t{1} << 31};
  EXPECT_TRUE(Rejects(spec, "more than 2^63 bytes"));
  spec.shape = {int64_t{1} << 40, int64_t{1} << 40, 0};  // empty: nothing to overflow
  EXPECT_TRUE(Accepts(spec));

  spec = Valid(OpType::kAllgather);
  spec.input = nullptr;
  EXPECT_TRUE(Rejects(spec, "input memory is null"));

  for (OpType op : {OpType::kAllreduce, OpType::kBroadcast}) {
    spec = Valid(op);
    spec.output = nullptr;
    EXPECT_TRUE(Rejects(spec, "output memory is null")) << OpTypeName(op);
  }

  for (OpType op : {OpType::kAllgather, OpType::kAlltoall, OpType::kReducescatter}) {
    spec = Valid(op);
    spec.shape = {};
    EXPECT_TRUE(Rejects(spec, "at least one dimension")) << OpTypeName(op);
  }

  spec = Valid(OpType::kAllreduce);
  spec.name = "";
  EXPECT_TRUE(Rejects(spec, "a name is required"));
}

TEST_F(SpecValidationTest, RejectsUnknownEnums) {
  OpSpec spec = Valid(OpType::kAllreduce);
  spec.dtype = static_cast<DataType>(42);
  EXPECT_TRUE(Rejects(spec, "unsupported data type"));

  spec = Valid(OpType::kAllreduce);
  spec.reduce_op = static_cast<ReduceOp>(9);
  EXPECT_TRUE(Rejects(spec, "unknown reduce op"));

  spec = Valid(OpType::kAllreduce);
  spec.op = static_cast<OpType>(77);
  EXPECT_TRUE(Rejects(spec, "unknown op type"));

  // The engine submits process-set changes itself; a frontend cannot.
  spec = Valid(OpType::kAllreduce);
  spec.op = OpType::kProcessSetChange;
  EXPECT_TRUE(Rejects(spec, "through add_process_set and remove_process_set only"));
}

TEST_F(SpecValidationTest, RejectsUnsupportedReductions) {
  // kUnsupported: Python's UnsupportedOperationError, a ValueError and a RuntimeError.
  OpSpec adasum = Valid(OpType::kReducescatter);
  adasum.reduce_op = ReduceOp::kAdasum;
  EXPECT_TRUE(RejectsAs(Status::Code::kUnsupported, adasum,
                        "reduce op Adasum is not supported (Adasum is for allreduce only); "
                        "reducescatter takes Average (0) or Sum (1)"));
  for (ReduceOp reduce : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    OpSpec spec = Valid(OpType::kReducescatter);
    spec.reduce_op = reduce;
    EXPECT_TRUE(RejectsAs(Status::Code::kUnsupported, spec,
                          std::string("reduce op ") + ReduceOpName(reduce) +
                              " is not supported; reducescatter takes Average (0) or Sum (1)"))
        << ReduceOpName(reduce);
  }
}

TEST_F(SpecValidationTest, AdasumNeedsFloatsAndAPowerOfTwoOfRanks) {
  OpSpec spec = Valid(OpType::kAllreduce);
  spec.reduce_op = ReduceOp::kAdasum;
  for (DataType dtype :
       {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
    spec.dtype = dtype;
    EXPECT_TRUE(Accepts(spec)) << DataTypeName(dtype);
  }
  for (DataType dtype : {DataType::kInt32, DataType::kUInt8, DataType::kBool}) {
    spec.dtype = dtype;
    EXPECT_TRUE(Rejects(spec, "Adasum needs a floating-point tensor")) << DataTypeName(dtype);
  }
  spec.dtype = DataType::kFloat32;
  topology_.size = 3;
  // kUnimplemented: Python's NotImplementedError, as Horovod raises.
  EXPECT_TRUE(RejectsAs(Status::Code::kUnimplemented, spec,
                        "Adasum needs a power-of-2 number of ranks; there are 3 ranks"));
  spec.process_set_id = 2;  // the set's size counts (the engine passes the set's topology)
  EXPECT_TRUE(RejectsAs(Status::Code::kUnimplemented, spec,
                        "Adasum needs a power-of-2 number of ranks; process set 2 has 3 ranks"));
  topology_.size = 1;
  EXPECT_TRUE(Accepts(spec));
}

TEST_F(SpecValidationTest, RejectsBoolAverageAndScaling) {
  OpSpec spec = Valid(OpType::kAllreduce);
  spec.dtype = DataType::kBool;
  spec.reduce_op = ReduceOp::kAverage;
  EXPECT_TRUE(Rejects(
      spec, "Average is not defined for bool tensors; use Sum/Max (any) or Min/Product (all)"));

  spec.reduce_op = ReduceOp::kSum;
  spec.prescale = 2.0;
  EXPECT_TRUE(Rejects(spec, "prescale_factor/postscale_factor cannot be applied to bool tensors"));
  spec.prescale = 1.0;
  spec.postscale = 0.5;
  EXPECT_TRUE(Rejects(spec, "prescale_factor/postscale_factor cannot be applied to bool tensors"));
}

TEST_F(SpecValidationTest, RejectsBroadcastRootOutsideTheWorld) {
  OpSpec spec = Valid(OpType::kBroadcast);
  spec.root_rank = -1;
  EXPECT_TRUE(Rejects(spec, "root_rank -1 is out of range: there are 4 ranks (0..3)"));
  spec.root_rank = 4;
  EXPECT_TRUE(Rejects(spec, "root_rank 4 is out of range: there are 4 ranks (0..3)"));
}

TEST_F(SpecValidationTest, RejectsBadAlltoallSplits) {
  OpSpec spec = Valid(OpType::kAlltoall);
  spec.splits = {4, 4};
  EXPECT_TRUE(Rejects(spec, "splits has 2 entries but there are 4 ranks; give one per rank"));
  spec.splits = {10, -2, 0, 0};
  EXPECT_TRUE(Rejects(spec, "splits must be non-negative, got [10, -2, 0, 0]"));
  spec.splits = {1, 1, 1, 1};
  EXPECT_TRUE(Rejects(spec, "splits [1, 1, 1, 1] sum to 4 but the tensor's first dimension is 8"));
  spec.splits = {INT64_MAX, 1, 0, 0};
  EXPECT_TRUE(Rejects(spec, "sum to more than 2^63"));
  spec.splits = {};
  spec.shape = {7, 2};
  EXPECT_TRUE(Rejects(spec,
                      "without splits the first dimension must be divisible by the number of "
                      "ranks, but 7 is not (there are 4 ranks); pass splits= for an uneven split"));
  spec.process_set_id = 3;
  spec.splits = {7};
  EXPECT_TRUE(Rejects(spec, "splits has 1 entry but process set 3 has 4 ranks"));
}

// What a frontend checks before the op runs (a TensorFlow graph being built): the same
// checks, against the set's size, with the root rank a global rank, and shapes that
// may be partly unknown.
TEST_F(SpecValidationTest, ArgumentsAloneAreCheckedTheSameWay) {
  OpSpec spec;  // no name, no memory
  spec.op = OpType::kBroadcast;
  spec.root_rank = 5;
  try {
    ValidateArguments(spec, /*set_size=*/2, /*world_size=*/4);
    ADD_FAILURE() << "root rank 5 of 4 accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "broadcast: root_rank 5 is out of range: there are 4 ranks (0..3)");
    EXPECT_EQ(error.code(), Status::Code::kInvalidArgument);
  }
  spec.root_rank = 3;  // a global rank: the set of 2 does not limit it here
  EXPECT_NO_THROW(ValidateArguments(spec, 2, 4));

  spec = OpSpec();
  spec.op = OpType::kAllreduce;
  spec.reduce_op = ReduceOp::kAdasum;
  spec.process_set_id = 1;
  EXPECT_NO_THROW(ValidateArguments(spec, 2, 3));  // the set's size counts, not the world's
  EXPECT_THROW(ValidateArguments(spec, 3, 4), Error);

  spec = OpSpec();
  spec.op = OpType::kAlltoall;
  spec.shape = {-1, 3};  // rows not known yet: the row checks wait for the op to run
  EXPECT_NO_THROW(ValidateArguments(spec, 4, 4));
  spec.splits = {1, 2, 3, 4};
  EXPECT_NO_THROW(ValidateArguments(spec, 4, 4));
  spec.splits = {1, 2, 3};  // but the count is known
  EXPECT_THROW(ValidateArguments(spec, 4, 4), Error);

  spec = OpSpec();
  spec.op = OpType::kAllgather;
  EXPECT_THROW(ValidateArguments(spec, 4, 4), Error);  // a 0-d tensor
  EXPECT_NO_THROW(ValidateArguments(spec, 4, 4, /*rank_known=*/false));
}

TEST_F(SpecValidationTest, RejectsGpuTensorsWithoutAGpuBackend) {
  for (OpType op : {OpType::kAllreduce, OpType::kBroadcast, OpType::kBarrier}) {
    OpSpec spec = Valid(op);
    spec.device = 0;
    EXPECT_TRUE(Rejects(spec, "the tensor is on GPU 0, but no GPU here")) << OpTypeName(op);
  }
}

TEST(RequestFromSpecTest, CopiesEveryNegotiatedField) {
  OpSpec spec;
  spec.op = OpType::kAlltoall;
  spec.name = "x";
  spec.dtype = DataType::kInt16;
  spec.shape = {6, 2};
  spec.reduce_op = ReduceOp::kMax;
  spec.prescale = 0.5;
  spec.postscale = 3.0;
  spec.root_rank = 1;
  spec.splits = {2, 4};
  spec.device = 2;
  Request r = RequestFromSpec(spec, 3);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.op, OpType::kAlltoall);
  EXPECT_EQ(r.name, "x");
  EXPECT_EQ(r.dtype, DataType::kInt16);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(r.reduce_op, ReduceOp::kMax);
  EXPECT_EQ(r.prescale, 0.5);
  EXPECT_EQ(r.postscale, 3.0);
  EXPECT_EQ(r.root_rank, 1);
  EXPECT_EQ(r.splits, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(r.device, 0);  // a GPU, not which one: ranks drive different GPUs
  EXPECT_EQ(r.group_id, 0);
  EXPECT_EQ(r.group_size, 0);
}

TEST(RequestFromSpecTest, DeviceSaysHostOrGpuOnly) {
  OpSpec spec;
  spec.name = "t";
  EXPECT_EQ(RequestFromSpec(spec, 0).device, -1);
  for (int device : {0, 1, 7}) {
    spec.device = device;
    EXPECT_EQ(RequestFromSpec(spec, 0).device, 0) << device;
  }
}

}  // namespace
}  // namespace lockstep
