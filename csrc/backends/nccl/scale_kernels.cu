#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>

#include "backends/nccl/scale_kernels.h"

namespace lockstep {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride loops cover larger buffers

// Integers multiply in double and truncate toward zero, saturating at the type's range
// (passed in: std::numeric_limits is host-only).
template <typename T>
__global__ void ScaleIntegers(T* data, int64_t count, double factor, T lowest, T highest) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{blockDim.x} * gridDim.x) {
    const double scaled = static_cast<double>(data[i]) * factor;
    if (!(scaled >= static_cast<double>(lowest))) {  // also NaN
      data[i] = lowest;
    } else if (scaled >= static_cast<double>(highest)) {
      data[i] = highest;
    } else {
      data[i] = static_cast<T>(scaled);
    }
  }
}

// float32 and float64 multiply in their own precision by the factor rounded to it.
template <typename T>
__global__ void ScaleFloats(T* data, int64_t count, T factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{blockDim.x} * gridDim.x) {
    data[i] *= factor;
  }
}

// 16-bit floats widen to float and multiply by float(factor).
__global__ void ScaleHalves(__half* data, int64_t count, float factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{blockDim.x} * gridDim.x) {
    data[i] = __float2half_rn(__half2float(data[i]) * factor);
  }
}

__global__ void ScaleBfloat16s(__nv_bfloat16* data, int64_t count, float factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{blockDim.x} * gridDim.x) {
    data[i] = __float2bfloat16_rn(__bfloat162float(data[i]) * factor);
  }
}

template <typename T>
void LaunchIntegers(void* buffer, int64_t count, double factor, int blocks, cudaStream_t stream) {
  ScaleIntegers<<<blocks, kThreads, 0, stream>>>(static_cast<T*>(buffer), count, factor,
                                                 std::numeric_limits<T>::lowest(),
                                                 std::numeric_limits<T>::max());
}

}  // namespace

cudaError_t ScaleDeviceBuffer(void* buffer, int64_t count, DataType dtype, double factor,
                              cudaStream_t stream) {
  if (count <= 0 || factor == 1.0 || dtype == DataType::kBool) return cudaSuccess;
  const int blocks = static_cast<int>(std::min(kMaxBlocks, (count + kThreads - 1) / kThreads));
  const float as_float = static_cast<float>(factor);
  switch (dtype) {
    case DataType::kUInt8:
      LaunchIntegers<uint8_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt8:
      LaunchIntegers<int8_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kUInt16:
      LaunchIntegers<uint16_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt16:
      LaunchIntegers<int16_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt32:
      LaunchIntegers<int32_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt64:
      LaunchIntegers<int64_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kFloat16:
      ScaleHalves<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(buffer), count, as_float);
      break;
    case DataType::kBFloat16:
      ScaleBfloat16s<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(buffer), count,
                                                      as_float);
      break;
    case DataType::kFloat32:
      ScaleFloats<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(buffer), count, as_float);
      break;
    case DataType::kFloat64:
      ScaleFloats<<<blocks, kThreads, 0, stream>>>(static_cast<double*>(buffer), count, factor);
      break;
    case DataType::kBool:
      break;
  }
  return cudaGetLastError();
}

}  // namespace lockstep
