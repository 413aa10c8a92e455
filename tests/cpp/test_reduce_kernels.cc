// ReduceInto must reduce exactly as the MPI ops lockstep uses would: wrapping integer
// arithmetic, any/all on bool, float16/bfloat16 computed in float.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "common/half.h"
#include "reduction/reduce_kernels.h"

namespace lockstep {
namespace {

template <typename T>
std::vector<T> Reduced(std::vector<T> inout, const std::vector<T>& in, DataType dtype,
                       ReduceOp op) {
  ReduceInto(in.data(), inout.data(), static_cast<int64_t>(in.size()), dtype, op);
  return inout;
}

TEST(ReduceIntoTest, EveryOpOnFloat32AndFloat64) {
  const std::vector<float> a = {1.5f, -2.0f, 3.0f}, b = {0.5f, 4.0f, -1.0f};
  EXPECT_EQ(Reduced(a, b, DataType::kFloat32, ReduceOp::kSum),
            (std::vector<float>{2.0f, 2.0f, 2.0f}));
  EXPECT_EQ(Reduced(a, b, DataType::kFloat32, ReduceOp::kAverage),
            (std::vector<float>{2.0f, 2.0f, 2.0f}));  // Average sums; the caller divides
  EXPECT_EQ(Reduced(a, b, DataType::kFloat32, ReduceOp::kMin),
            (std::vector<float>{0.5f, -2.0f, -1.0f}));
  EXPECT_EQ(Reduced(a, b, DataType::kFloat32, ReduceOp::kMax),
            (std::vector<float>{1.5f, 4.0f, 3.0f}));
  EXPECT_EQ(Reduced(a, b, DataType::kFloat32, ReduceOp::kProduct),
            (std::vector<float>{0.75f, -8.0f, -3.0f}));
  const std::vector<double> c = {1e300, -1.0}, d = {1e300, 2.5};
  EXPECT_EQ(Reduced(c, d, DataType::kFloat64, ReduceOp::kSum), (std::vector<double>{2e300, 1.5}));
}

TEST(ReduceIntoTest, IntegersWrapInsteadOfOverflowing) {
  const int8_t max8 = std::numeric_limits<int8_t>::max();
  EXPECT_EQ(Reduced<int8_t>({max8, -5}, {1, 3}, DataType::kInt8, ReduceOp::kSum),
            (std::vector<int8_t>{std::numeric_limits<int8_t>::min(), -2}));
  EXPECT_EQ(Reduced<uint8_t>({200, 3}, {100, 4}, DataType::kUInt8, ReduceOp::kSum),
            (std::vector<uint8_t>{44, 7}));
  EXPECT_EQ(Reduced<int16_t>({300, -7}, {300, 3}, DataType::kInt16, ReduceOp::kProduct),
            (std::vector<int16_t>{static_cast<int16_t>(90000 - 65536 * 1), -21}));
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Reduced<int64_t>({max64, 7}, {1, -9}, DataType::kInt64, ReduceOp::kSum),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -2}));
  EXPECT_EQ(Reduced<int32_t>({5, -5}, {-3, 4}, DataType::kInt32, ReduceOp::kMin),
            (std::vector<int32_t>{-3, -5}));
  EXPECT_EQ(Reduced<int32_t>({5, -5}, {-3, 4}, DataType::kInt32, ReduceOp::kMax),
            (std::vector<int32_t>{5, 4}));
}

TEST(ReduceIntoTest, BoolIsAnyForSumAndMaxAndAllForMinAndProduct) {
  const std::vector<uint8_t> a = {0, 0, 1, 1}, b = {0, 1, 0, 1};
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kSum), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kMax), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kMin), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kProduct), (std::vector<uint8_t>{0, 0, 0, 1}));
}

TEST(ReduceIntoTest, SixteenBitTypesReduceInFloatAndRoundBack) {
  const std::vector<uint16_t> a = {FloatToFloat16(1.5f), FloatToFloat16(-2.0f)};
  const std::vector<uint16_t> b = {FloatToFloat16(2.25f), FloatToFloat16(8.0f)};
  EXPECT_EQ(Reduced(a, b, DataType::kFloat16, ReduceOp::kSum),
            (std::vector<uint16_t>{FloatToFloat16(3.75f), FloatToFloat16(6.0f)}));
  EXPECT_EQ(Reduced(a, b, DataType::kFloat16, ReduceOp::kMax),
            (std::vector<uint16_t>{FloatToFloat16(2.25f), FloatToFloat16(8.0f)}));
  const std::vector<uint16_t> c = {FloatToBFloat16(3.0f)}, d = {FloatToBFloat16(-0.5f)};
  EXPECT_EQ(Reduced(c, d, DataType::kBFloat16, ReduceOp::kProduct),
            (std::vector<uint16_t>{FloatToBFloat16(-1.5f)}));
}

// ReduceTo reads the accumulator from one buffer and writes another; every dtype and op
// must give ReduceInto's bits, with the output separate or the same as either input
// (the two-rank shared-memory allreduce writes over its own rank's input in place).
TEST(ReduceToTest, MatchesReduceIntoWhateverTheOutputAliases) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {1.5f, -0.0f, nan, 3.0f, 1e30f, 7.0f, -2.5f, 0.0f, 9.0f};
  const std::vector<float> b = {0.25f, 0.0f, 1.0f, nan, 1e30f, -7.0f, 4.0f, -0.0f, 1.0f};
  for (DataType dtype : {DataType::kUInt8, DataType::kInt8, DataType::kInt16, DataType::kUInt16,
                         DataType::kInt32, DataType::kInt64, DataType::kFloat32, DataType::kFloat64,
                         DataType::kFloat16, DataType::kBFloat16, DataType::kBool}) {
    const int64_t n = static_cast<int64_t>(a.size()), element = DataTypeSize(dtype);
    // The same float pattern's bytes, reinterpreted: only bit-for-bit agreement matters.
    std::vector<char> in(n * element), acc(n * element);
    for (int64_t i = 0; i < n * element; ++i) {
      in[i] = reinterpret_cast<const char*>(b.data())[i % (n * 4)];
      acc[i] = reinterpret_cast<const char*>(a.data())[(i * 7) % (n * 4)];
    }
    if (dtype == DataType::kBool) {
      for (char& c : in) c = c & 1;
      for (char& c : acc) c = c & 1;
    }
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      std::vector<char> expected = acc;
      ReduceInto(in.data(), expected.data(), n, dtype, op);
      std::vector<char> separate(n * element);
      ReduceTo(in.data(), acc.data(), separate.data(), n, dtype, op);
      std::vector<char> over_acc = acc, over_in = in;
      ReduceTo(in.data(), over_acc.data(), over_acc.data(), n, dtype, op);
      ReduceTo(over_in.data(), acc.data(), over_in.data(), n, dtype, op);
      const auto label = testing::Message()
                         << DataTypeName(dtype) << " op " << static_cast<int>(op);
      EXPECT_EQ(separate, expected) << label;
      EXPECT_EQ(over_acc, expected) << label;
      EXPECT_EQ(over_in, expected) << label;
    }
  }
}

TEST(ReducesExactlyInAnyOrderTest, IntegersAlwaysFloatsOnlyWhereNoOrderCanShow) {
  const std::vector<int8_t> ints = {-128, 0, 127};
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    EXPECT_TRUE(ReducesExactlyInAnyOrder(ints.data(), 3, DataType::kInt8, op, 64));
  }
  EXPECT_FALSE(ReducesExactlyInAnyOrder(ints.data(), 3, DataType::kInt8, ReduceOp::kAdasum, 2));
  const std::vector<float> plain = {1.5f, -2.0f}, zero = {1.0f, -0.0f};
  const std::vector<float> nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  // Sums and products: a single combination (2 ranks) and no NaN.
  EXPECT_TRUE(ReducesExactlyInAnyOrder(plain.data(), 2, DataType::kFloat32, ReduceOp::kSum, 2));
  EXPECT_TRUE(ReducesExactlyInAnyOrder(zero.data(), 2, DataType::kFloat32, ReduceOp::kProduct, 1));
  EXPECT_FALSE(ReducesExactlyInAnyOrder(plain.data(), 2, DataType::kFloat32, ReduceOp::kSum, 3));
  EXPECT_FALSE(ReducesExactlyInAnyOrder(nan.data(), 2, DataType::kFloat32, ReduceOp::kAverage, 2));
  // Min and max: any rank count, but neither NaN nor zeros of either sign.
  EXPECT_TRUE(ReducesExactlyInAnyOrder(plain.data(), 2, DataType::kFloat32, ReduceOp::kMin, 9));
  EXPECT_FALSE(ReducesExactlyInAnyOrder(zero.data(), 2, DataType::kFloat32, ReduceOp::kMax, 2));
  EXPECT_FALSE(ReducesExactlyInAnyOrder(nan.data(), 2, DataType::kFloat32, ReduceOp::kMin, 2));
  const std::vector<uint16_t> half_nan = {FloatToFloat16(1.0f), 0x7e00};
  const std::vector<uint16_t> bf_zero = {FloatToBFloat16(2.0f), 0x8000};
  const std::vector<double> wide = {3.0, 1e300};
  EXPECT_FALSE(ReducesExactlyInAnyOrder(half_nan.data(), 2, DataType::kFloat16, ReduceOp::kSum, 2));
  EXPECT_FALSE(ReducesExactlyInAnyOrder(bf_zero.data(), 2, DataType::kBFloat16, ReduceOp::kMax, 4));
  EXPECT_TRUE(ReducesExactlyInAnyOrder(wide.data(), 2, DataType::kFloat64, ReduceOp::kMax, 4));
  EXPECT_FALSE(ReducesExactlyInAnyOrder(wide.data(), 2, DataType::kFloat64, ReduceOp::kAdasum, 2));
}

}  // namespace
}  // namespace lockstep
