#include <algorithm>
#include <cstdint>

#include "backends/nccl/batched_copy.h"
#include "backends/nccl/scale_math.cuh"
#include "fusion/device_layout.h"

namespace lockstep {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocksPerCopy = 128;

// Passed by value as the kernel's parameter (6 KiB at 256 copies; CUDA 12.1+ allows
// 32 KiB), so a launch needs no descriptor upload.
struct CopyBatch {
  const void* src[kMaxCopiesPerLaunch];
  void* dst[kMaxCopiesPerLaunch];
  int64_t bytes[kMaxCopiesPerLaunch];
};

// blockIdx.y picks the copy, blockIdx.x strides through it. 16-byte accesses where
// both ends allow them, bytes for the rest.
__global__ void PlainCopies(CopyBatch batch) {
  const char* src = static_cast<const char*>(batch.src[blockIdx.y]);
  char* dst = static_cast<char*>(batch.dst[blockIdx.y]);
  const int64_t bytes = batch.bytes[blockIdx.y];
  const int64_t start = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  int64_t vector_bytes = 0;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
    vector_bytes = bytes / 16 * 16;
    const uint4* in = reinterpret_cast<const uint4*>(src);
    uint4* out = reinterpret_cast<uint4*>(dst);
    for (int64_t i = start; i < vector_bytes / 16; i += stride) out[i] = in[i];
  }
  for (int64_t i = vector_bytes + start; i < bytes; i += stride) dst[i] = src[i];
}

template <typename T>
__global__ void ScaledCopies(CopyBatch batch, double factor) {
  const T* src = static_cast<const T*>(batch.src[blockIdx.y]);
  T* dst = static_cast<T*>(batch.dst[blockIdx.y]);
  const int64_t count = batch.bytes[blockIdx.y] / static_cast<int64_t>(sizeof(T));
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{blockDim.x} * gridDim.x) {
    dst[i] = ScaleValue(src[i], factor);
  }
}

template <typename T>
void LaunchScaled(const CopyBatch& batch, dim3 grid, double factor, cudaStream_t stream) {
  ScaledCopies<T><<<grid, kThreads, 0, stream>>>(batch, factor);
}

template <typename... T>
cudaError_t LoadEach() {
  cudaFuncAttributes attributes;
  cudaError_t first_failure = cudaFuncGetAttributes(&attributes, &PlainCopies);
  for (const void* kernel : {reinterpret_cast<const void*>(&ScaledCopies<T>)...}) {
    const cudaError_t result = cudaFuncGetAttributes(&attributes, kernel);
    if (first_failure == cudaSuccess) first_failure = result;
  }
  return first_failure;
}

}  // namespace

cudaError_t LoadBatchedCopyKernels() {
  return LoadEach<uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t, __half, __nv_bfloat16,
                  float, double>();
}

cudaError_t BatchedCopy(const DeviceCopy* copies, int count, DataType dtype, double factor,
                        cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (count > kMaxCopiesPerLaunch) return cudaErrorInvalidValue;
  CopyBatch batch{};
  int64_t largest = 0;
  for (int i = 0; i < count; ++i) {
    batch.src[i] = copies[i].src;
    batch.dst[i] = copies[i].dst;
    batch.bytes[i] = copies[i].bytes;
    largest = std::max(largest, copies[i].bytes);
  }
  if (largest == 0) return cudaSuccess;
  const bool scaled = factor != 1.0 && dtype != DataType::kBool;
  // The launch's own error is read with cudaGetLastError below: clear what earlier
  // calls on this thread may have left (a failed timing event, a device switch).
  (void)cudaGetLastError();
  // Plain copies move 16 bytes per thread and step, scaled ones an element.
  const int64_t per_block = kThreads * (scaled ? static_cast<int64_t>(DataTypeSize(dtype)) : 16);
  const dim3 grid(
      static_cast<unsigned>(std::min(kMaxBlocksPerCopy, (largest + per_block - 1) / per_block)),
      static_cast<unsigned>(count));
  if (!scaled) {
    PlainCopies<<<grid, kThreads, 0, stream>>>(batch);
    return cudaGetLastError();
  }
  switch (dtype) {
    case DataType::kUInt8:
      LaunchScaled<uint8_t>(batch, grid, factor, stream);
      break;
    case DataType::kInt8:
      LaunchScaled<int8_t>(batch, grid, factor, stream);
      break;
    case DataType::kUInt16:
      LaunchScaled<uint16_t>(batch, grid, factor, stream);
      break;
    case DataType::kInt16:
      LaunchScaled<int16_t>(batch, grid, factor, stream);
      break;
    case DataType::kInt32:
      LaunchScaled<int32_t>(batch, grid, factor, stream);
      break;
    case DataType::kInt64:
      LaunchScaled<int64_t>(batch, grid, factor, stream);
      break;
    case DataType::kFloat16:
      LaunchScaled<__half>(batch, grid, factor, stream);
      break;
    case DataType::kBFloat16:
      LaunchScaled<__nv_bfloat16>(batch, grid, factor, stream);
      break;
    case DataType::kFloat32:
      LaunchScaled<float>(batch, grid, factor, stream);
      break;
    case DataType::kFloat64:
      LaunchScaled<double>(batch, grid, factor, stream);
      break;
    case DataType::kBool:
      break;
  }
  return cudaGetLastError();
}

}  // namespace lockstep
