// The collectives NCCL runs on device memory, queued on lockstep's stream: allreduce
// (a lone tensor straight from its memory, fused ones packed by one batched copy
// kernel with the scaling folded in), allgather with uneven first dimensions,
// broadcast, alltoall with splits and reducescatter with uneven rows. Nothing here
// waits for the GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/collectives.h"
#include "backends/nccl/device_buffers.h"
#include "backends/nccl/gpu_phases.h"
#include "backends/nccl/nccl_communicator.h"
#include "backends/nccl/nccl_library.h"

namespace lockstep {

class NcclOps {
 public:
  NcclOps(const NcclLibrary& library, NcclCommunicator& comm, std::shared_ptr<DeviceStream> stream,
          const Topology& topology, GpuPhaseTimer& phases);

  // Queues the response (whose inputs lockstep's stream already waits for). The
  // response must be one NCCL runs exactly (WhyStaged(response) empty). Throws Error.
  std::vector<OpResult> Run(const Response& r, const std::vector<LocalTensor>& tensors);

 private:
  std::vector<OpResult> Allreduce(const Response& r, const std::vector<LocalTensor>& tensors);
  void AllreduceFused(const Response& r, const std::vector<LocalTensor>& tensors);
  OpResult Allgather(const Response& r, const OpSpec& spec);
  OpResult Broadcast(const Response& r, const OpSpec& spec);
  OpResult Alltoall(const Response& r, const OpSpec& spec);
  OpResult Reducescatter(const Response& r, const OpSpec& spec);
  // Postscale and Average's division by the set's size, Horovod's arithmetic.
  double FinalFactor(const Response& r) const;
  void Check(ncclResult_t result, const char* what, const Response& r) const;
  void Phase(const char* name) { phases_.Mark(stream_->get(), name); }

  const NcclLibrary& nccl_;
  NcclCommunicator& comm_;
  std::shared_ptr<DeviceStream> stream_;
  Topology topology_;
  GpuPhaseTimer& phases_;
  DeviceScratch scratch_;  // the fusion buffer, and scaled copies of inputs
};

}  // namespace lockstep
