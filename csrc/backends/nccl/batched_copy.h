// The copies into and out of the device fusion buffer, many tensors per kernel launch
// (a launch per tensor would cost more than small tensors' copies themselves), with
// pre- or postscaling folded in.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lockstep/types.h"

namespace lockstep {

struct DeviceCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t bytes = 0;  // a whole number of elements
};

// Copies copies[0..count) (count <= kMaxCopiesPerLaunch, fusion/device_layout.h) in one
// launch on `stream`; with factor != 1 each element is scaled as ScaleDeviceBuffer
// does (bool is copied unscaled). Returns the launch status.
cudaError_t BatchedCopy(const DeviceCopy* copies, int count, DataType dtype, double factor,
                        cudaStream_t stream);

// Loads the copy kernels on the current device now (see LoadScaleKernels).
cudaError_t LoadBatchedCopyKernels();

}  // namespace lockstep
