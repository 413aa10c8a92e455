// Names, sizes and validity checks of the core enums.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "lockstep/types.h"

namespace lockstep {
namespace {

TEST(Types, DataTypeSizes) {
  EXPECT_EQ(DataTypeSize(DataType::kUInt8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kInt8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kBool), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kInt16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kUInt16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kBFloat16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat64), 8u);
}

TEST(Types, DataTypeNamesAreDistinctAndLowerCase) {
  EXPECT_STREQ(DataTypeName(DataType::kFloat32), "float32");
  EXPECT_STREQ(DataTypeName(DataType::kBFloat16), "bfloat16");
  EXPECT_STREQ(DataTypeName(DataType::kUInt8), "uint8");
  EXPECT_STREQ(DataTypeName(DataType::kUInt16), "uint16");
  EXPECT_STREQ(DataTypeName(DataType::kBool), "bool");
  std::set<std::string> names;
  for (int raw = 0; raw < kNumDataTypes; ++raw) {
    std::string name = DataTypeName(static_cast<DataType>(raw));
    for (char c : name) EXPECT_FALSE(c >= 'A' && c <= 'Z') << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumDataTypes));
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(Types, FloatingPointTypes) {
  std::set<DataType> floating = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                 DataType::kFloat64};
  for (int raw = 0; raw < kNumDataTypes; ++raw) {
    DataType dtype = static_cast<DataType>(raw);
    EXPECT_EQ(IsFloatingPoint(dtype), floating.count(dtype) == 1) << DataTypeName(dtype);
  }
}

TEST(Types, ReduceOpNames) {
  EXPECT_STREQ(ReduceOpName(ReduceOp::kAverage), "Average");
  EXPECT_STREQ(ReduceOpName(ReduceOp::kSum), "Sum");
  EXPECT_STREQ(ReduceOpName(ReduceOp::kAdasum), "Adasum");
  EXPECT_STREQ(ReduceOpName(ReduceOp::kMin), "Min");
  EXPECT_STREQ(ReduceOpName(ReduceOp::kMax), "Max");
  EXPECT_STREQ(ReduceOpName(ReduceOp::kProduct), "Product");
}

TEST(Types, OpTypeNames) {
  EXPECT_STREQ(OpTypeName(OpType::kAllreduce), "allreduce");
  EXPECT_STREQ(OpTypeName(OpType::kAllgather), "allgather");
  EXPECT_STREQ(OpTypeName(OpType::kBroadcast), "broadcast");
  EXPECT_STREQ(OpTypeName(OpType::kAlltoall), "alltoall");
  EXPECT_STREQ(OpTypeName(OpType::kReducescatter), "reducescatter");
  EXPECT_STREQ(OpTypeName(OpType::kBarrier), "barrier");
  EXPECT_STREQ(OpTypeName(OpType::kJoin), "join");
  EXPECT_STREQ(OpTypeName(OpType::kProcessSetChange), "process_set_change");
}

TEST(Types, ValidityChecksCoverExactlyTheEnumerators) {
  for (int raw = 0; raw < 256; ++raw) {
    uint8_t byte = static_cast<uint8_t>(raw);
    EXPECT_EQ(IsValidDataType(byte), raw < kNumDataTypes) << raw;
    EXPECT_EQ(IsValidReduceOp(byte), raw <= 5) << raw;
    EXPECT_EQ(IsValidOpType(byte), raw <= 7) << raw;
  }
}

}  // namespace
}  // namespace lockstep
