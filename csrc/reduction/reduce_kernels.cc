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

// out[i] = op(acc[i], in[i]); out may be acc or in (element-wise, so aliasing is safe).
template <typename T>
void Reduce(const T* in, const T* acc, T* out, int64_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      for (int64_t i = 0; i < count; ++i) out[i] = std::min(acc[i], in[i]);
      return;
    case ReduceOp::kMax:
      for (int64_t i = 0; i < count; ++i) out[i] = std::max(acc[i], in[i]);
      return;
    case ReduceOp::kProduct:
      for (int64_t i = 0; i < count; ++i) out[i] = WrappingMultiply(acc[i], in[i]);
      return;
    default:  // Sum, and Average (divided afterwards)
      for (int64_t i = 0; i < count; ++i) out[i] = WrappingAdd(acc[i], in[i]);
      return;
  }
}

void ReduceBool(const uint8_t* in, const uint8_t* acc, uint8_t* out, int64_t count, ReduceOp op) {
  const bool all = op == ReduceOp::kMin || op == ReduceOp::kProduct;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = all ? (acc[i] != 0 && in[i] != 0) : (acc[i] != 0 || in[i] != 0);
  }
}

template <typename T>
void ReduceTyped(const void* in, const void* acc, void* out, int64_t count, ReduceOp op) {
  Reduce(static_cast<const T*>(in), static_cast<const T*>(acc), static_cast<T*>(out), count, op);
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
  ReduceTo(in, inout, inout, count, dtype, op);
}

void ReduceTo(const void* in, const void* acc, void* out, int64_t count, DataType dtype,
              ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8:
      return ReduceTyped<uint8_t>(in, acc, out, count, op);
    case DataType::kInt8:
      return ReduceTyped<int8_t>(in, acc, out, count, op);
    case DataType::kInt16:
      return ReduceTyped<int16_t>(in, acc, out, count, op);
    case DataType::kUInt16:
      return ReduceTyped<uint16_t>(in, acc, out, count, op);
    case DataType::kInt32:
      return ReduceTyped<int32_t>(in, acc, out, count, op);
    case DataType::kInt64:
      return ReduceTyped<int64_t>(in, acc, out, count, op);
    case DataType::kFloat32:
      return ReduceTyped<float>(in, acc, out, count, op);
    case DataType::kFloat64:
      return ReduceTyped<double>(in, acc, out, count, op);
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return ReduceSixteenBit(in, acc, out, count, dtype, op);
    case DataType::kBool:
      return ReduceBool(static_cast<const uint8_t*>(in), static_cast<const uint8_t*>(acc),
                        static_cast<uint8_t*>(out), count, op);
  }
}

}  // namespace lockstep
