// One element scaled by a factor with Horovod's arithmetic, the same as the host's
// ScaleInPlace (reduction/scaling.h): float32 and float64 multiply in their own
// precision by the factor rounded to it, 16-bit floats widen to float and multiply by
// float(factor), integers multiply in double and truncate toward zero, saturating at
// the type's range. Shared by the scale kernel and the batched copy kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/std/limits>

namespace lockstep {

template <typename T>
__device__ __forceinline__ T ScaleValue(T value, double factor) {
  const double scaled = static_cast<double>(value) * factor;
  constexpr T kLowest = cuda::std::numeric_limits<T>::lowest();
  constexpr T kHighest = cuda::std::numeric_limits<T>::max();
  if (scaled != scaled) return T{0};  // NaN (an infinite factor times 0), as the host
  // For int64 the highest value rounds up to 2^63, which does not fit: stay below it.
  if (scaled >= static_cast<double>(kHighest)) return kHighest;
  if (scaled <= static_cast<double>(kLowest)) return kLowest;
  return static_cast<T>(scaled);
}

template <>
__device__ __forceinline__ float ScaleValue<float>(float value, double factor) {
  return value * static_cast<float>(factor);
}

template <>
__device__ __forceinline__ double ScaleValue<double>(double value, double factor) {
  return value * factor;
}

template <>
__device__ __forceinline__ __half ScaleValue<__half>(__half value, double factor) {
  return __float2half_rn(__half2float(value) * static_cast<float>(factor));
}

template <>
__device__ __forceinline__ __nv_bfloat16 ScaleValue<__nv_bfloat16>(__nv_bfloat16 value,
                                                                   double factor) {
  return __float2bfloat16_rn(__bfloat162float(value) * static_cast<float>(factor));
}

}  // namespace lockstep
