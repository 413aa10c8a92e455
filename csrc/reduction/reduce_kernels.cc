#include "reduction/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "common/half.h"
#include "reduction/scaling.h"

namespace lockstep {
namespace {

// Unsigned arithmetic, so integer overflow wraps as MPI_SUM/MPI_PROD do here instead of
// being undefined behaviour.
template <typename T>
T WrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
T WrappingMultiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // unsigned int promotion keeps the product of small types defined as well
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename T>
void Reduce(const T* in, T* inout, int64_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      for (int64_t i = 0; i < count; ++i) inout[i] = std::min(inout[i], in[i]);
      return;
    case ReduceOp::kMax:
      for (int64_t i = 0; i < count; ++i) inout[i] = std::max(inout[i], in[i]);
      return;
    case ReduceOp::kProduct:
      for (int64_t i = 0; i < count; ++i) inout[i] = WrappingMultiply(inout[i], in[i]);
      return;
    default:  // Sum, and Average (divided afterwards)
      for (int64_t i = 0; i < count; ++i) inout[i] = WrappingAdd(inout[i], in[i]);
      return;
  }
}

void ReduceBool(const uint8_t* in, uint8_t* inout, int64_t count, ReduceOp op) {
  const bool all = op == ReduceOp::kMin || op == ReduceOp::kProduct;
  for (int64_t i = 0; i < count; ++i) {
    inout[i] = all ? (inout[i] != 0 && in[i] != 0) : (inout[i] != 0 || in[i] != 0);
  }
}

// The elements as float or double, for the floating point checks.
template <typename T, typename Check>
bool AllOf(const void* data, int64_t count, Check check) {
  const T* values = static_cast<const T*>(data);
  for (int64_t i = 0; i < count; ++i) {
    if (!check(values[i])) return false;
  }
  return true;
}

template <typename Check>
bool AllFloats(const void* data, int64_t count, DataType dtype, Check check) {
  switch (dtype) {
    case DataType::kFloat32:
      return AllOf<float>(data, count, [&](float v) { return check(static_cast<double>(v)); });
    case DataType::kFloat64:
      return AllOf<double>(data, count, check);
    case DataType::kFloat16:
      return AllOf<uint16_t>(data, count, [&](uint16_t v) { return check(Float16ToFloat(v)); });
    case DataType::kBFloat16:
      return AllOf<uint16_t>(data, count, [&](uint16_t v) { return check(BFloat16ToFloat(v)); });
    default:
      return true;
  }
}

}  // namespace

bool ReducesExactlyInAnyOrder(const void* data, int64_t count, DataType dtype, ReduceOp op,
                              int ranks) {
  if (!IsFloatingPoint(dtype)) return op != ReduceOp::kAdasum;
  switch (op) {
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return AllFloats(data, count, dtype, [](double v) { return !std::isnan(v) && v != 0; });
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
    case ReduceOp::kProduct:
      return ranks <= 2 && AllFloats(data, count, dtype, [](double v) { return !std::isnan(v); });
    case ReduceOp::kAdasum:
      return false;
  }
  return false;
}

void ReduceInto(const void* in, void* inout, int64_t count, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8:
      return Reduce(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(inout), count, op);
    case DataType::kInt8:
      return Reduce(static_cast<const int8_t*>(in), static_cast<int8_t*>(inout), count, op);
    case DataType::kInt16:
      return Reduce(static_cast<const int16_t*>(in), static_cast<int16_t*>(inout), count, op);
    case DataType::kUInt16:
      return Reduce(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), count, op);
    case DataType::kInt32:
      return Reduce(static_cast<const int32_t*>(in), static_cast<int32_t*>(inout), count, op);
    case DataType::kInt64:
      return Reduce(static_cast<const int64_t*>(in), static_cast<int64_t*>(inout), count, op);
    case DataType::kFloat32:
      return Reduce(static_cast<const float*>(in), static_cast<float*>(inout), count, op);
    case DataType::kFloat64:
      return Reduce(static_cast<const double*>(in), static_cast<double*>(inout), count, op);
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return ReduceSixteenBit(in, inout, count, dtype, op);
    case DataType::kBool:
      return ReduceBool(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(inout), count, op);
  }
}

}  // namespace lockstep
