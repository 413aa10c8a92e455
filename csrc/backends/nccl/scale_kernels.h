// Pre- and postscaling of device buffers (and Average's division), on a CUDA stream,
// with the same arithmetic as the host's ScaleInPlace (reduction/scaling.h) so that a
// job's numbers do not depend on where its tensors live.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "lockstep/types.h"

namespace lockstep {

// buffer[i] *= factor for `count` elements of `dtype` (booleans are left alone).
// Asynchronous on `stream`; returns the launch status.
cudaError_t ScaleDeviceBuffer(void* buffer, int64_t count, DataType dtype, double factor,
                              cudaStream_t stream);

// Loads every scale kernel on the current device now. CUDA loads kernels lazily by
// default, and a load may synchronize the whole context: a first launch in the
// middle of training would wait for the framework's queued work, and for a collective
// that is waiting on other ranks.
cudaError_t LoadScaleKernels();

}  // namespace lockstep
