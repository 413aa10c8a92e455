#include "backends/nccl/gpu_probe.h"

#include <cuda_runtime_api.h>

namespace lockstep {

GpuProbe ProbeGpus() {
  GpuProbe probe;
  const cudaError_t status = cudaGetDeviceCount(&probe.devices);
  if (status == cudaSuccess && probe.devices > 0) return probe;
  probe.devices = 0;
  switch (status) {
    case cudaErrorInsufficientDriver:
      probe.problem = "no usable CUDA driver (libcuda.so.1 is missing or older than the CUDA " +
                      std::to_string(CUDART_VERSION / 1000) + " runtime lockstep was built with)";
      break;
    case cudaSuccess:
    case cudaErrorNoDevice:
      probe.problem = "the CUDA driver sees no GPU (check CUDA_VISIBLE_DEVICES)";
      break;
    default:
      probe.problem = std::string("CUDA cannot start: ") + cudaGetErrorString(status);
  }
  return probe;
}

}  // namespace lockstep
