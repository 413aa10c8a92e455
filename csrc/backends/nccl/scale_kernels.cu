#include <algorithm>

#include "backends/nccl/scale_kernels.h"
#include "backends/nccl/scale_math.cuh"

namespace lockstep {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride loops cover larger buffers

template <typename T>
__global__ void ScaleKernel(T* data, int64_t count, double factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{blockDim.x} * gridDim.x) {
    data[i] = ScaleValue(data[i], factor);
  }
}

template <typename T>
void Launch(void* buffer, int64_t count, double factor, int blocks, cudaStream_t stream) {
  ScaleKernel<<<blocks, kThreads, 0, stream>>>(static_cast<T*>(buffer), count, factor);
}

template <typename... T>
cudaError_t LoadEach() {
  cudaFuncAttributes attributes;
  cudaError_t first_failure = cudaSuccess;
  for (const void* kernel : {reinterpret_cast<const void*>(&ScaleKernel<T>)...}) {
    const cudaError_t result = cudaFuncGetAttributes(&attributes, kernel);
    if (first_failure == cudaSuccess) first_failure = result;
  }
  return first_failure;
}

}  // namespace

cudaError_t LoadScaleKernels() {
  return LoadEach<uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t, __half, __nv_bfloat16,
                  float, double>();
}

cudaError_t ScaleDeviceBuffer(void* buffer, int64_t count, DataType dtype, double factor,
                              cudaStream_t stream) {
  if (count <= 0 || factor == 1.0 || dtype == DataType::kBool) return cudaSuccess;
  const int blocks = static_cast<int>(std::min(kMaxBlocks, (count + kThreads - 1) / kThreads));
  // The launch's own error is read with cudaGetLastError below: clear what earlier
  // calls on this thread may have left (a failed timing event, a device switch).
  (void)cudaGetLastError();
  switch (dtype) {
    case DataType::kUInt8:
      Launch<uint8_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt8:
      Launch<int8_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kUInt16:
      Launch<uint16_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt16:
      Launch<int16_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt32:
      Launch<int32_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kInt64:
      Launch<int64_t>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kFloat16:
      Launch<__half>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kBFloat16:
      Launch<__nv_bfloat16>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kFloat32:
      Launch<float>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kFloat64:
      Launch<double>(buffer, count, factor, blocks, stream);
      break;
    case DataType::kBool:
      break;
  }
  return cudaGetLastError();
}

}  // namespace lockstep
