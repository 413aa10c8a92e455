// GPU tensors through the host collectives (MPI, shared memory): what
// LOCKSTEP_GPU_OPERATIONS=mpi asks for, what runs where libnccl is missing, and what
// runs the responses NCCL cannot compute exactly (int16/uint16, Adasum). Inputs are
// copied to pinned host memory on lockstep's stream, which the background thread then
// waits for (host collectives need the bytes), and results are copied back
// asynchronously.
#pragma once

#include <memory>
#include <vector>

#include "backends/collectives.h"
#include "backends/nccl/device_buffers.h"
#include "backends/nccl/gpu_phases.h"

namespace lockstep {

class StagedOps {
 public:
  StagedOps(Collectives& host, std::shared_ptr<DeviceStream> stream, GpuPhaseTimer& phases)
      : host_(host), stream_(std::move(stream)), phases_(phases) {}

  // Lockstep's stream already waits for the inputs. Throws Error.
  std::vector<OpResult> Run(const Response& r, const std::vector<LocalTensor>& tensors);

 private:
  Collectives& host_;
  std::shared_ptr<DeviceStream> stream_;
  GpuPhaseTimer& phases_;
  PinnedBuffer pinned_;
};

}  // namespace lockstep
