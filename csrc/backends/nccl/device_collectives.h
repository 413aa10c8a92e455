// The GPU collectives of one process set: lockstep's stream waits for each input's
// ready event, a start event marks where the collective's own time begins, NCCL (or
// MPI staging) runs the response, and a done event recorded after it travels with the
// results: the op's stream waits on it when the frontend takes the result (Wait, or
// the completion callback), not earlier. The handles complete without the host
// waiting for the GPU; failures that surface later (an asynchronous NCCL error, a
// collective past the timeout, found by InflightCollectives' watchdog) stop the set's
// GPU collectives, fail the unfinished ops' done events, and deal with the
// communicator as the loaded NCCL allows (gpu_agreement.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/gpu_collectives.h"
#include "backends/nccl/device_context.h"
#include "backends/nccl/gpu_phases.h"
#include "backends/nccl/inflight.h"
#include "backends/nccl/nccl_communicator.h"
#include "backends/nccl/nccl_ops.h"
#include "backends/nccl/staged_ops.h"

namespace lockstep {

class DeviceCollectives : public Collectives {
 public:
  // The local part: device, stream, staging. Throws Error.
  explicit DeviceCollectives(const GpuCollectivesOptions& options);
  // Collective over the set: agrees with the other members on whether all drained
  // their GPU work before destroying the communicator, so that either all destroy or
  // none does (ncclCommDestroy waits for the others on the host).
  ~DeviceCollectives() override;
  // The collective part (options.operations == kNccl): the set's communicator.
  void Connect();
  std::vector<OpResult> Run(const Response& response,
                            const std::vector<LocalTensor>& tensors) override;
  std::string Poll() override;

 private:
  std::vector<OpResult> RunOnStream(const Response& r, const std::vector<LocalTensor>& tensors);
  void ThrowIfStopped(const Response& r);
  // Ends the set's GPU collectives; returns what was done with the communicator.
  std::string Stop(const std::string& why, bool work_queued_behind);
  std::string FailGpuPath(const std::string& what_happened);
  void CloseCommunicator();

  GpuCollectivesOptions options_;
  int device_;
  std::shared_ptr<DeviceStream> stream_;
  GpuPhaseTimer phase_timer_;
  std::unique_ptr<NcclCommunicator> comm_;  // null with LOCKSTEP_GPU_OPERATIONS=mpi
  std::unique_ptr<NcclOps> nccl_;
  StagedOps staged_;
  InflightCollectives inflight_;
  std::string broken_;  // why the set's GPU collectives stopped; empty while they work
};

}  // namespace lockstep
