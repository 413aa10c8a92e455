#include "reduction/adasum.h"

#include <cfloat>
#include <cmath>
#include <stdexcept>

#include "common/half.h"

namespace lockstep {
namespace {

template <typename T>
AdasumDots Dots(const T* a, const T* b, int64_t count) {
  AdasumDots d;
  for (int64_t i = 0; i < count; ++i) {
    const double x = static_cast<double>(a[i]);
    const double y = static_cast<double>(b[i]);
    d.dot += x * y;
    d.a_sq += x * x;
    d.b_sq += y * y;
  }
  return d;
}

template <float (*ToFloat)(uint16_t)>
AdasumDots SixteenBitDots(const uint16_t* a, const uint16_t* b, int64_t count) {
  AdasumDots d;
  for (int64_t i = 0; i < count; ++i) {
    const double x = ToFloat(a[i]);
    const double y = ToFloat(b[i]);
    d.dot += x * y;
    d.a_sq += x * x;
    d.b_sq += y * y;
  }
  return d;
}

template <typename T>
void ScaledAdd(T* a, const T* b, int64_t count, double a_coeff, double b_coeff) {
  for (int64_t i = 0; i < count; ++i) a[i] = static_cast<T>(a_coeff * a[i] + b_coeff * b[i]);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void SixteenBitScaledAdd(uint16_t* a, const uint16_t* b, int64_t count, double a_coeff,
                         double b_coeff) {
  // Horovod's float16 kernel: float coefficients, a fused multiply-add, one rounding.
  const float fa = static_cast<float>(a_coeff);
  const float fb = static_cast<float>(b_coeff);
  for (int64_t i = 0; i < count; ++i) {
    a[i] = FromFloat(std::fmaf(fb, ToFloat(b[i]), fa * ToFloat(a[i])));
  }
}

}  // namespace

bool AdasumSupports(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

AdasumDots AdasumPartialDots(const void* a, const void* b, int64_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return Dots(static_cast<const float*>(a), static_cast<const float*>(b), count);
    case DataType::kFloat64:
      return Dots(static_cast<const double*>(a), static_cast<const double*>(b), count);
    case DataType::kFloat16:
      return SixteenBitDots<Float16ToFloat>(static_cast<const uint16_t*>(a),
                                            static_cast<const uint16_t*>(b), count);
    case DataType::kBFloat16:
      return SixteenBitDots<BFloat16ToFloat>(static_cast<const uint16_t*>(a),
                                             static_cast<const uint16_t*>(b), count);
    default:
      throw std::invalid_argument("Adasum supports floating-point tensors only");
  }
}

double AdasumCoefficient(double dot, double own_sq) {
  // A (nearly) zero vector contributes nothing, so its coefficient does not matter;
  // skipping the division keeps it finite.
  static const double kTiny = std::sqrt(DBL_MIN);
  return own_sq >= kTiny ? 1.0 - dot / own_sq * 0.5 : 1.0;
}

void AdasumScaledAdd(void* a, const void* b, int64_t count, DataType dtype, double a_coeff,
                     double b_coeff) {
  switch (dtype) {
    case DataType::kFloat32:
      ScaledAdd(static_cast<float*>(a), static_cast<const float*>(b), count, a_coeff, b_coeff);
      break;
    case DataType::kFloat64:
      ScaledAdd(static_cast<double*>(a), static_cast<const double*>(b), count, a_coeff, b_coeff);
      break;
    case DataType::kFloat16:
      SixteenBitScaledAdd<Float16ToFloat, FloatToFloat16>(
          static_cast<uint16_t*>(a), static_cast<const uint16_t*>(b), count, a_coeff, b_coeff);
      break;
    case DataType::kBFloat16:
      SixteenBitScaledAdd<BFloat16ToFloat, FloatToBFloat16>(
          static_cast<uint16_t*>(a), static_cast<const uint16_t*>(b), count, a_coeff, b_coeff);
      break;
    default:
      throw std::invalid_argument("Adasum supports floating-point tensors only");
  }
}

}  // namespace lockstep
