#include "backends/gpu_info.h"

namespace lockstep {

int BuiltNcclVersion() { return 0; }

NcclInfo QueryNcclInfo() {
  NcclInfo info;
  info.problem =
      "this build of lockstep has no GPU (NCCL) backend: the CUDA toolkit or NCCL was not found "
      "when it was built (rebuild where nvcc and nccl.h are installed, or with "
      "-DLOCKSTEP_WITH_NCCL=ON to see what is missing)";
  return info;
}

}  // namespace lockstep
