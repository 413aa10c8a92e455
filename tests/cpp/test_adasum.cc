// Adasum's arithmetic: the coefficients give the sum of orthogonal vectors and the
// average of equal ones, a zero vector keeps coefficient 1, and the kernels compute
// in the precision Horovod uses for each dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "common/half.h"
#include "reduction/adasum.h"

namespace lockstep {
namespace {

std::vector<double> Combine(std::vector<double> a, const std::vector<double>& b) {
  const AdasumDots d =
      AdasumPartialDots(a.data(), b.data(), static_cast<int64_t>(a.size()), DataType::kFloat64);
  AdasumScaledAdd(a.data(), b.data(), static_cast<int64_t>(a.size()), DataType::kFloat64,
                  AdasumCoefficient(d.dot, d.a_sq), AdasumCoefficient(d.dot, d.b_sq));
  return a;
}

TEST(AdasumTest, OrthogonalVectorsAdd) {
  EXPECT_EQ(Combine({3, 0, 0}, {0, 4, 0}), (std::vector<double>{3, 4, 0}));
}

TEST(AdasumTest, EqualVectorsAverage) {
  EXPECT_EQ(Combine({1, -2, 5}, {1, -2, 5}), (std::vector<double>{1, -2, 5}));
}

TEST(AdasumTest, ZeroVectorLeavesTheOtherUnchanged) {
  EXPECT_EQ(Combine({0, 0}, {2, 7}), (std::vector<double>{2, 7}));
  EXPECT_EQ(Combine({2, 7}, {0, 0}), (std::vector<double>{2, 7}));
}

TEST(AdasumTest, GeneralCaseMatchesTheFormula) {
  const std::vector<double> a = {1, 2}, b = {3, 1};
  const double dot = 5, a_sq = 5, b_sq = 10;
  const std::vector<double> got = Combine(a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(got[i], (1 - dot / a_sq * 0.5) * a[i] + (1 - dot / b_sq * 0.5) * b[i]);
  }
}

TEST(AdasumTest, Float32CombinesInDoubleAndRoundsOnce) {
  std::vector<float> a = {0.1f, 0.7f, -1.3f}, b = {0.3f, -0.2f, 0.9f};
  const AdasumDots d = AdasumPartialDots(a.data(), b.data(), 3, DataType::kFloat32);
  double dot = 0, a_sq = 0, b_sq = 0;
  for (int i = 0; i < 3; ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    a_sq += static_cast<double>(a[i]) * a[i];
    b_sq += static_cast<double>(b[i]) * b[i];
  }
  EXPECT_EQ(d.dot, dot);
  EXPECT_EQ(d.a_sq, a_sq);
  EXPECT_EQ(d.b_sq, b_sq);
  const double ca = AdasumCoefficient(dot, a_sq), cb = AdasumCoefficient(dot, b_sq);
  std::vector<float> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(static_cast<float>(ca * a[i] + cb * b[i]));
  AdasumScaledAdd(a.data(), b.data(), 3, DataType::kFloat32, ca, cb);
  EXPECT_EQ(a, expected);
}

TEST(AdasumTest, Float16CombinesInFloat) {
  std::vector<uint16_t> a = {FloatToFloat16(1.0f), FloatToFloat16(2.0f)};
  std::vector<uint16_t> b = {FloatToFloat16(0.5f), FloatToFloat16(-1.0f)};
  AdasumScaledAdd(a.data(), b.data(), 2, DataType::kFloat16, 0.5, 2.0);
  EXPECT_EQ(Float16ToFloat(a[0]), 1.5f);
  EXPECT_EQ(Float16ToFloat(a[1]), -1.0f);
}

TEST(AdasumTest, OnlyFloatingTypes) {
  EXPECT_TRUE(AdasumSupports(DataType::kBFloat16));
  EXPECT_FALSE(AdasumSupports(DataType::kInt64));
  std::vector<int32_t> v = {1};
  EXPECT_THROW(AdasumPartialDots(v.data(), v.data(), 1, DataType::kInt32), std::invalid_argument);
}

}  // namespace
}  // namespace lockstep
