// What this process can know about the GPU (NCCL) backend without starting it:
// whether the build has one, which libnccl it would use, and why GPU collectives
// cannot run here. Implemented by backends/nccl/ in builds with NCCL and by
// backends/no_gpu/ otherwise, so nothing above this seam needs an #ifdef.
#pragma once

#include "lockstep/values.h"

namespace lockstep {

// NcclBuilt(): the NCCL_VERSION_CODE built against, 0 without the GPU backend.
int BuiltNcclVersion();
// GetNcclInfo(): loads libnccl and probes CUDA on the first call; later calls return
// the same answer.
NcclInfo QueryNcclInfo();

}  // namespace lockstep
