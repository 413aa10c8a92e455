// The NCCL backend's pieces that need no GPU: dtype and reduce-op mapping (what NCCL
// computes exactly, what is staged through the host), and NCCL/CUDA failures as
// messages naming the tensors. Built with the NCCL backend only.
#include <gtest/gtest.h>

#include <string>

#include "backends/nccl/device_context.h"
#include "backends/nccl/nccl_types.h"

namespace lockstep {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(NcclTypesTest, EveryDtypeNcclHasMapsToItsOwnType) {
  EXPECT_EQ(NcclDataTypeOf(DataType::kUInt8), ncclUint8);
  EXPECT_EQ(NcclDataTypeOf(DataType::kInt8), ncclInt8);
  EXPECT_EQ(NcclDataTypeOf(DataType::kInt32), ncclInt32);
  EXPECT_EQ(NcclDataTypeOf(DataType::kInt64), ncclInt64);
  EXPECT_EQ(NcclDataTypeOf(DataType::kFloat16), ncclFloat16);
  EXPECT_EQ(NcclDataTypeOf(DataType::kBFloat16), ncclBfloat16);
  EXPECT_EQ(NcclDataTypeOf(DataType::kFloat32), ncclFloat32);
  EXPECT_EQ(NcclDataTypeOf(DataType::kFloat64), ncclFloat64);
  EXPECT_EQ(NcclDataTypeOf(DataType::kBool), ncclUint8);  // 0/1 bytes
  EXPECT_FALSE(NcclDataTypeOf(DataType::kInt16).has_value());
  EXPECT_FALSE(NcclDataTypeOf(DataType::kUInt16).has_value());
}

TEST(NcclTypesTest, AverageIsASumDividedAfterwards) {
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kAverage, DataType::kFloat32), ncclSum);
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kSum, DataType::kInt64), ncclSum);
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kMin, DataType::kFloat16), ncclMin);
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kMax, DataType::kBFloat16), ncclMax);
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kProduct, DataType::kFloat64), ncclProd);
  EXPECT_FALSE(NcclRedOpFor(ReduceOp::kAdasum, DataType::kFloat32).has_value());
}

TEST(NcclTypesTest, BoolReductionsAreExactLogicalOps) {
  // A uint8 sum of 0/1 bytes would wrap past 255 ranks and leave values other than 1.
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kSum, DataType::kBool), ncclMax);      // or
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kProduct, DataType::kBool), ncclMin);  // and
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kMin, DataType::kBool), ncclMin);
  EXPECT_EQ(NcclRedOpFor(ReduceOp::kMax, DataType::kBool), ncclMax);
}

TEST(NcclTypesTest, ResponsesNcclCannotComputeAreStagedWithTheReason) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.dtype = DataType::kFloat32;
  r.reduce_op = ReduceOp::kAverage;
  EXPECT_EQ(WhyStaged(r), "");
  r.reduce_op = ReduceOp::kAdasum;
  EXPECT_EQ(WhyStaged(r), "NCCL has no Adasum reduction");
  r.reduce_op = ReduceOp::kSum;
  r.dtype = DataType::kInt16;
  EXPECT_EQ(WhyStaged(r), "NCCL has no int16 type");
  r.type = ResponseType::kAllgather;  // moves bytes only, but the dtype decides
  r.dtype = DataType::kUInt16;
  EXPECT_EQ(WhyStaged(r), "NCCL has no uint16 type");
  r.dtype = DataType::kBool;
  EXPECT_EQ(WhyStaged(r), "");
}

TEST(NcclErrorTest, NamesTheCallTheTensorsAndNcclsOwnWords) {
  const NcclLibrary& library = LoadNcclLibrary();
  ASSERT_TRUE(library.loaded) << library.load_error;  // the build found libnccl
  const std::string text =
      DescribeNcclFailure(ncclInvalidArgument, "ncclAllReduce", {"grad.w", "grad.b"}, library);
  EXPECT_TRUE(Contains(text, "NCCL ncclAllReduce failed for tensor(s) 'grad.w', 'grad.b': "))
      << text;
  EXPECT_TRUE(Contains(text, library.GetErrorString(ncclInvalidArgument))) << text;
  EXPECT_TRUE(Contains(text, "(ncclInvalidArgument)")) << text;
  try {
    CheckNccl(ncclRemoteError, "ncclBroadcast", {"w"}, library);
    FAIL() << "CheckNccl did not throw";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "ncclBroadcast failed for tensor(s) 'w'")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "ncclRemoteError")) << e.what();
  }
  EXPECT_NO_THROW(CheckNccl(ncclSuccess, "ncclBroadcast", {"w"}, library));
}

TEST(NcclErrorTest, WithoutTheLibraryTheCodeStillNamesTheError) {
  const NcclLibrary unloaded;
  EXPECT_EQ(DescribeNcclFailure(ncclInternalError, "ncclGroupEnd", {"t"}, unloaded),
            "NCCL ncclGroupEnd failed for tensor(s) 't': (ncclInternalError)");
}

TEST(CudaErrorTest, NamesTheCallTheTensorsAndCudasOwnWords) {
  try {
    CheckCuda(cudaErrorMemoryAllocation, "cudaMallocAsync of a 64-byte result", {"x"});
    FAIL() << "CheckCuda did not throw";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "CUDA cudaMallocAsync of a 64-byte result failed for "
                         "tensor(s) 'x': cudaErrorMemoryAllocation"))
        << e.what();
  }
  EXPECT_NO_THROW(CheckCuda(cudaSuccess, "anything", {}));
}

TEST(CudaErrorTest, LongListsOfTensorsAreShortened) {
  EXPECT_EQ(TensorList({"a"}), "'a'");
  EXPECT_EQ(TensorList({"a", "b", "c", "d", "e", "f"}), "'a', 'b', 'c', 'd' and 2 more");
}

}  // namespace
}  // namespace lockstep
