// float16/bfloat16 conversions (known bit patterns, every bit pattern, every rounding
// midpoint) and the element-wise kernels built on them: scaling and 16-bit
// reductions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/half.h"
#include "reduction/scaling.h"

namespace lockstep {
namespace {

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool IsBFloatNaN(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// The value of a float16 bit pattern, computed independently of half.h.
double HalfValue(uint16_t h) {
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Float16Test, KnownBitPatternsToFloat) {
  EXPECT_EQ(BitsOf(Float16ToFloat(0x0000)), 0x00000000u);
  EXPECT_EQ(BitsOf(Float16ToFloat(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(Float16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(Float16ToFloat(0xbc00), -1.0f);
  EXPECT_EQ(Float16ToFloat(0x4000), 2.0f);
  EXPECT_EQ(Float16ToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(Float16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(Float16ToFloat(0xfbff), -65504.0f);
  EXPECT_EQ(Float16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(Float16ToFloat(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(Float16ToFloat(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(Float16ToFloat(0x7c00), kInf);
  EXPECT_EQ(Float16ToFloat(0xfc00), -kInf);
  EXPECT_TRUE(std::isnan(Float16ToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(Float16ToFloat(0x7c01)));
}

TEST(Float16Test, KnownFloatsToBitPatterns) {
  EXPECT_EQ(FloatToFloat16(0.0f), 0x0000);
  EXPECT_EQ(FloatToFloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToFloat16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFloat16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToFloat16(0.1f), 0x2e66);
}

TEST(Float16Test, OverflowBecomesInfinity) {
  EXPECT_EQ(FloatToFloat16(65519.99f), 0x7bff);  // still rounds down to the max
  EXPECT_EQ(FloatToFloat16(65520.0f), 0x7c00);   // the tie rounds to even: infinity
  EXPECT_EQ(FloatToFloat16(1e6f), 0x7c00);
  EXPECT_EQ(FloatToFloat16(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToFloat16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(FloatToFloat16(kInf), 0x7c00);
  EXPECT_EQ(FloatToFloat16(-kInf), 0xfc00);
}

TEST(Float16Test, UnderflowRoundsToZeroOrSubnormal) {
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(FloatToFloat16(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(FloatToFloat16(std::ldexp(1.0f, -25)), 0x0000);  // tie: even is zero
  EXPECT_EQ(FloatToFloat16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToFloat16(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2
  EXPECT_EQ(FloatToFloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Float16Test, NaNStaysNaN) {
  EXPECT_TRUE(IsHalfNaN(FloatToFloat16(kNaN)));
  EXPECT_TRUE(IsHalfNaN(FloatToFloat16(-kNaN)));
  EXPECT_TRUE(IsHalfNaN(FloatToFloat16(FromBits(0x7f800001u))));  // payload only in low bits
  EXPECT_TRUE(IsHalfNaN(FloatToFloat16(FromBits(0x7fc00000u))));
}

TEST(Float16Test, RoundsToNearestEvenOnTies) {
  const float ulp = std::ldexp(1.0f, -10);  // float16 spacing just above 1
  EXPECT_EQ(FloatToFloat16(1.0f + ulp / 2), 0x3c00);
  EXPECT_EQ(FloatToFloat16(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3c01);
  EXPECT_EQ(FloatToFloat16(1.0f + 3 * ulp / 2), 0x3c02);
  EXPECT_EQ(FloatToFloat16(std::nextafter(1.0f + 3 * ulp / 2, 0.0f)), 0x3c01);
  EXPECT_EQ(FloatToFloat16(-(1.0f + ulp / 2)), 0xbc00);
  // Between the largest subnormal and the smallest normal.
  EXPECT_EQ(FloatToFloat16(std::ldexp(2047.0f, -25)), 0x0400);
}

TEST(Float16Test, EveryBitPatternRoundTrips) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float value = Float16ToFloat(h);
    const uint16_t back = FloatToFloat16(value);
    if (IsHalfNaN(h)) {
      ASSERT_TRUE(std::isnan(value)) << std::hex << h;
      ASSERT_TRUE(IsHalfNaN(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(value), HalfValue(h)) << std::hex << h;
    ASSERT_EQ(back, h) << std::hex << h;
  }
}

// Every midpoint between neighbouring finite float16 values (and between the largest
// and the first value past it) rounds to the even neighbour; one float ulp either side
// goes to the nearer neighbour.
TEST(Float16Test, EveryRoundingMidpointGoesToEven) {
  for (uint16_t h = 0; h < 0x7c00; ++h) {
    const double low = HalfValue(h);
    const double high = h == 0x7bff ? 65536.0 : HalfValue(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((low + high) / 2);  // exact: 12 significant bits
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
    for (uint16_t sign : {0x0000, 0x8000}) {
      const float s = sign ? -1.0f : 1.0f;
      ASSERT_EQ(FloatToFloat16(s * mid), sign | even) << std::hex << h;
      ASSERT_EQ(FloatToFloat16(s * std::nextafter(mid, 0.0f)), sign | h) << std::hex << h;
      ASSERT_EQ(FloatToFloat16(s * std::nextafter(mid, kInf)), sign | (h + 1)) << std::hex << h;
    }
  }
}

TEST(BFloat16Test, KnownBitPatterns) {
  EXPECT_EQ(BitsOf(BFloat16ToFloat(0x0000)), 0x00000000u);
  EXPECT_EQ(BitsOf(BFloat16ToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xc040), -3.0f);
  EXPECT_EQ(BFloat16ToFloat(0x7f7f), 3.38953139e38f);  // max finite
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(BFloat16ToFloat(0x7f80), kInf);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7fc0)));

  EXPECT_EQ(FloatToBFloat16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(3.38953139e38f), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(FloatToBFloat16(0.1f), 0x3dcd);
  EXPECT_EQ(FloatToBFloat16(kInf), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-kInf), 0xff80);
}

TEST(BFloat16Test, OverflowNaNAndTies) {
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::max()), 0xff80);
  // Truncating 0x7f800001 would give infinity; it must stay NaN.
  EXPECT_TRUE(IsBFloatNaN(FloatToBFloat16(FromBits(0x7f800001u))));
  EXPECT_TRUE(IsBFloatNaN(FloatToBFloat16(FromBits(0xff800001u))));
  EXPECT_TRUE(IsBFloatNaN(FloatToBFloat16(kNaN)));
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f807fffu)), 0x3f80);
}

TEST(BFloat16Test, EveryBitPatternRoundTrips) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const float value = BFloat16ToFloat(b);
    const uint16_t back = FloatToBFloat16(value);
    if (IsBFloatNaN(b)) {
      ASSERT_TRUE(std::isnan(value)) << std::hex << b;
      ASSERT_TRUE(IsBFloatNaN(back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << std::hex << b;
      continue;
    }
    ASSERT_EQ(BitsOf(value), i << 16) << std::hex << b;
    ASSERT_EQ(back, b) << std::hex << b;
  }
}

TEST(BFloat16Test, EveryRoundingMidpointGoesToEven) {
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    const uint32_t mid = (b << 16) | 0x8000u;  // halfway to b + 1 (b + 1 may be infinity)
    const uint32_t even = (b & 1) ? b + 1 : b;
    for (uint32_t sign : {0x00000000u, 0x80000000u}) {
      const uint32_t sign16 = sign >> 16;
      ASSERT_EQ(FloatToBFloat16(FromBits(sign | mid)), sign16 | even) << std::hex << b;
      ASSERT_EQ(FloatToBFloat16(FromBits(sign | (mid - 1))), sign16 | b) << std::hex << b;
      ASSERT_EQ(FloatToBFloat16(FromBits(sign | (mid + 1))), sign16 | (b + 1)) << std::hex << b;
    }
  }
}

template <typename T>
std::vector<T> Scaled(std::vector<T> values, DataType dtype, double factor) {
  ScaleInPlace(values.data(), static_cast<int64_t>(values.size()), dtype, factor);
  return values;
}

TEST(ScaleInPlaceTest, IntegersTruncateTowardZero) {
  EXPECT_EQ(Scaled<uint8_t>({10, 255, 3}, DataType::kUInt8, 0.5),
            (std::vector<uint8_t>{5, 127, 1}));
  EXPECT_EQ(Scaled<int8_t>({-7, 7, 100}, DataType::kInt8, 0.5), (std::vector<int8_t>{-3, 3, 50}));
  EXPECT_EQ(Scaled<int16_t>({-1001, 1001, 3}, DataType::kInt16, 0.1),
            (std::vector<int16_t>{-100, 100, 0}));
  EXPECT_EQ(Scaled<int32_t>({-5, 5, 2000000000}, DataType::kInt32, 0.5),
            (std::vector<int32_t>{-2, 2, 1000000000}));
  EXPECT_EQ(Scaled<int64_t>({-9, 9, 1000000000000}, DataType::kInt64, 0.25),
            (std::vector<int64_t>{-2, 2, 250000000000}));
  EXPECT_EQ(Scaled<int64_t>({-3, 1000000000000}, DataType::kInt64, 3.0),
            (std::vector<int64_t>{-9, 3000000000000}));
}

TEST(ScaleInPlaceTest, Floats) {
  EXPECT_EQ(Scaled<float>({1.5f, -2.0f, 0.0f}, DataType::kFloat32, 2.0),
            (std::vector<float>{3.0f, -4.0f, 0.0f}));
  EXPECT_EQ(Scaled<double>({0.1, -3.0}, DataType::kFloat64, 10.0),
            (std::vector<double>{0.1 * 10.0, -30.0}));
  // float16: 1, 2, -3 halved; 65504 doubled overflows to infinity.
  EXPECT_EQ(Scaled<uint16_t>({0x3c00, 0x4000, 0xc200}, DataType::kFloat16, 0.5),
            (std::vector<uint16_t>{0x3800, 0x3c00, 0xbe00}));
  EXPECT_EQ(Scaled<uint16_t>({0x7bff}, DataType::kFloat16, 2.0), (std::vector<uint16_t>{0x7c00}));
  // bfloat16: 1 and 3 halved.
  EXPECT_EQ(Scaled<uint16_t>({0x3f80, 0x4040}, DataType::kBFloat16, 0.5),
            (std::vector<uint16_t>{0x3f00, 0x3fc0}));
}

// Horovod scales float32 in float with the factor rounded to float; computing in
// double and rounding once gives a different result for many inputs, so check
// against the float arithmetic on a range of values and factors.
TEST(ScaleInPlaceTest, Float32ScalesInFloatWithTheFactorRoundedToFloat) {
  int differs_from_double = 0;
  for (double factor : {0.1, 1.0 / 3.0, 0.7, 1e-3, 2.5e7}) {
    std::vector<float> values;
    for (int i = 1; i <= 1000; ++i) values.push_back(static_cast<float>(i) * 1.37f);
    const std::vector<float> scaled = Scaled<float>(values, DataType::kFloat32, factor);
    for (size_t i = 0; i < values.size(); ++i) {
      const float expected = static_cast<float>(factor) * values[i];
      ASSERT_EQ(BitsOf(scaled[i]), BitsOf(expected)) << values[i] << " * " << factor;
      if (expected != static_cast<float>(static_cast<double>(values[i]) * factor)) {
        ++differs_from_double;
      }
    }
  }
  EXPECT_GT(differs_from_double, 0) << "the test would not catch scaling in double";
}

TEST(ScaleInPlaceTest, IntegersScaleInDoubleAndTruncateOnce) {
  // An Average of 3 ranks with postscale 1 is a Sum times 1/3 in double.
  const double third = 1.0 / 3.0;
  std::vector<int64_t> sums = {-7, -6, -3, 0, 3, 6, 7, 9, 300000000001};
  const std::vector<int64_t> scaled = Scaled<int64_t>(sums, DataType::kInt64, third);
  for (size_t i = 0; i < sums.size(); ++i) {
    EXPECT_EQ(scaled[i], static_cast<int64_t>(static_cast<double>(sums[i]) * third)) << sums[i];
  }
}

TEST(ScaleInPlaceTest, TouchesOnlyCountElements) {
  std::vector<int32_t> values = {10, 20, 30};
  ScaleInPlace(values.data(), 2, DataType::kInt32, 3.0);
  EXPECT_EQ(values, (std::vector<int32_t>{30, 60, 30}));
  ScaleInPlace(values.data(), 0, DataType::kInt32, 3.0);
  EXPECT_EQ(values, (std::vector<int32_t>{30, 60, 30}));
}

TEST(ScaleInPlaceTest, BoolCannotBeScaledButFactorOneIsANoOp) {
  std::vector<uint8_t> flags = {1, 0};
  EXPECT_THROW(ScaleInPlace(flags.data(), 2, DataType::kBool, 2.0), std::invalid_argument);
  EXPECT_NO_THROW(ScaleInPlace(flags.data(), 2, DataType::kBool, 1.0));
  EXPECT_EQ(flags, (std::vector<uint8_t>{1, 0}));
}

// inout = op(in, inout), elementwise, read back as floats.
std::vector<float> Reduced(DataType dtype, ReduceOp op, const std::vector<float>& in,
                           const std::vector<float>& inout) {
  auto encode = dtype == DataType::kFloat16 ? FloatToFloat16 : FloatToBFloat16;
  auto decode = dtype == DataType::kFloat16 ? Float16ToFloat : BFloat16ToFloat;
  std::vector<uint16_t> a, b;
  for (float v : in) a.push_back(encode(v));
  for (float v : inout) b.push_back(encode(v));
  ReduceSixteenBit(a.data(), b.data(), static_cast<int64_t>(b.size()), dtype, op);
  std::vector<float> out;
  for (uint16_t v : b) out.push_back(decode(v));
  return out;
}

TEST(ReduceSixteenBitTest, EveryOpForBothTypes) {
  const std::vector<float> in = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> inout = {2.0f, 5.0f, -1.0f, 0.5f};
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    SCOPED_TRACE(DataTypeName(dtype));
    EXPECT_EQ(Reduced(dtype, ReduceOp::kSum, in, inout), (std::vector<float>{3, 3, 2, 1}));
    EXPECT_EQ(Reduced(dtype, ReduceOp::kAverage, in, inout), (std::vector<float>{3, 3, 2, 1}));
    EXPECT_EQ(Reduced(dtype, ReduceOp::kMin, in, inout), (std::vector<float>{1, -2, -1, 0.5f}));
    EXPECT_EQ(Reduced(dtype, ReduceOp::kMax, in, inout), (std::vector<float>{2, 5, 3, 0.5f}));
    EXPECT_EQ(Reduced(dtype, ReduceOp::kProduct, in, inout),
              (std::vector<float>{2, -10, -3, 0.25f}));
  }
}

TEST(ReduceSixteenBitTest, ResultsRoundBackToNearestEven) {
  // float16 spacing at 2048 is 2: 2049 ties down to 2048, 2051 ties up to 2052.
  EXPECT_EQ(Reduced(DataType::kFloat16, ReduceOp::kSum, {1, 3, 65504}, {2048, 2048, 65504}),
            (std::vector<float>{2048, 2052, kInf}));
  // bfloat16 spacing at 256 is 2.
  EXPECT_EQ(Reduced(DataType::kBFloat16, ReduceOp::kSum, {1, 3}, {256, 256}),
            (std::vector<float>{256, 260}));
}

}  // namespace
}  // namespace lockstep

TEST(ScaleInPlaceSaturation, OutOfRangeIntegersClampToTheTypeRange) {
  int8_t small[] = {100, -100, 3};
  lockstep::ScaleInPlace(small, 3, lockstep::DataType::kInt8, 2.0);
  EXPECT_EQ(small[0], 127);
  EXPECT_EQ(small[1], -128);
  EXPECT_EQ(small[2], 6);
  uint8_t unsigned_values[] = {5, 200};
  lockstep::ScaleInPlace(unsigned_values, 2, lockstep::DataType::kUInt8, -1.0);
  EXPECT_EQ(unsigned_values[0], 0);
  EXPECT_EQ(unsigned_values[1], 0);
  int64_t big[] = {int64_t{1} << 62, -(int64_t{1} << 62)};
  lockstep::ScaleInPlace(big, 2, lockstep::DataType::kInt64, 4.0);
  EXPECT_EQ(big[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(big[1], std::numeric_limits<int64_t>::lowest());
}
