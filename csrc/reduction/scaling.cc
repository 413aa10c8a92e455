#include "reduction/scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/half.h"

namespace lockstep {
namespace {

// Floating tensors scale in their own precision with the factor rounded to it, as
// Horovod does (float32: float(factor) * x in float), so results match it bit for bit.
template <typename T>
void ScaleFloats(T* data, int64_t count, double factor) {
  const T f = static_cast<T>(factor);
  for (int64_t i = 0; i < count; ++i) data[i] = f * data[i];
}

// Integers saturate at their type's range (a cast of an out-of-range double is
// undefined behaviour), then truncate toward zero.
template <typename T>
void ScaleIntegers(T* data, int64_t count, double factor) {
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  for (int64_t i = 0; i < count; ++i) {
    double scaled = static_cast<double>(data[i]) * factor;
    if (std::isnan(scaled)) scaled = 0;
    // For int64, `hi` rounds up to 2^63, which itself does not fit: stay below it.
    data[i] = scaled >= hi   ? std::numeric_limits<T>::max()
              : scaled <= lo ? std::numeric_limits<T>::lowest()
                             : static_cast<T>(scaled);
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void ScaleSixteen(uint16_t* data, int64_t count, double factor) {
  const float f = static_cast<float>(factor);
  for (int64_t i = 0; i < count; ++i) data[i] = FromFloat(ToFloat(data[i]) * f);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void ReduceSixteen(const uint16_t* in, const uint16_t* acc, uint16_t* out, int64_t count,
                   ReduceOp op) {
  for (int64_t i = 0; i < count; ++i) {
    float a = ToFloat(in[i]);
    float b = ToFloat(acc[i]);
    float r;
    switch (op) {
      case ReduceOp::kMin:
        r = std::fmin(a, b);
        break;
      case ReduceOp::kMax:
        r = std::fmax(a, b);
        break;
      case ReduceOp::kProduct:
        r = a * b;
        break;
      default:
        r = a + b;
        break;  // Sum and Average reduce by summing
    }
    out[i] = FromFloat(r);
  }
}

}  // namespace

void ScaleInPlace(void* buffer, int64_t count, DataType dtype, double factor) {
  if (factor == 1.0 || count == 0) return;
  switch (dtype) {
    case DataType::kUInt8:
      ScaleIntegers(static_cast<uint8_t*>(buffer), count, factor);
      break;
    case DataType::kInt8:
      ScaleIntegers(static_cast<int8_t*>(buffer), count, factor);
      break;
    case DataType::kInt16:
      ScaleIntegers(static_cast<int16_t*>(buffer), count, factor);
      break;
    case DataType::kUInt16:
      ScaleIntegers(static_cast<uint16_t*>(buffer), count, factor);
      break;
    case DataType::kInt32:
      ScaleIntegers(static_cast<int32_t*>(buffer), count, factor);
      break;
    case DataType::kInt64:
      ScaleIntegers(static_cast<int64_t*>(buffer), count, factor);
      break;
    case DataType::kFloat32:
      ScaleFloats(static_cast<float*>(buffer), count, factor);
      break;
    case DataType::kFloat64:
      ScaleFloats(static_cast<double*>(buffer), count, factor);
      break;
    case DataType::kFloat16:
      ScaleSixteen<Float16ToFloat, FloatToFloat16>(static_cast<uint16_t*>(buffer), count, factor);
      break;
    case DataType::kBFloat16:
      ScaleSixteen<BFloat16ToFloat, FloatToBFloat16>(static_cast<uint16_t*>(buffer), count, factor);
      break;
    case DataType::kBool:
      throw std::invalid_argument("bool tensors cannot be scaled");
  }
}

void ReduceSixteenBit(const void* in, void* inout, int64_t count, DataType dtype, ReduceOp op) {
  ReduceSixteenBit(in, inout, inout, count, dtype, op);
}

void ReduceSixteenBit(const void* in, const void* acc, void* out, int64_t count, DataType dtype,
                      ReduceOp op) {
  auto src = static_cast<const uint16_t*>(in);
  auto from = static_cast<const uint16_t*>(acc);
  auto dst = static_cast<uint16_t*>(out);
  if (dtype == DataType::kFloat16) {
    ReduceSixteen<Float16ToFloat, FloatToFloat16>(src, from, dst, count, op);
  } else {
    ReduceSixteen<BFloat16ToFloat, FloatToBFloat16>(src, from, dst, count, op);
  }
}

}  // namespace lockstep
