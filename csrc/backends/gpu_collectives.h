// The GPU side of the collectives seam, without CUDA types: everything the engine asks
// of the GPU backend. Implemented by backends/nccl/ (NCCL, or MPI staged through
// pinned host memory) in builds with the NCCL backend and by backends/no_gpu/
// otherwise, so nothing above the backends needs an #ifdef or a CUDA header.
#pragma once

#include <memory>
#include <string>

#include "backends/collectives.h"
#include "backends/communicator.h"
#include "common/config.h"
#include "common/phase_recorder.h"

namespace lockstep {

// Why GPU tensors cannot run in this process with these settings (no GPU backend in
// the build, no CUDA driver, no GPU, libnccl missing while nccl was asked for); empty
// where they can. Asked once at Init; ops on GPU tensors then fail at submission on
// every rank with this message.
std::string GpuUnavailableReason(const Config& config);

// On the caller's thread when a device op is enqueued: checks the device (a process
// drives one GPU, the one of its first device op, as Horovod pins one process per GPU)
// and records an event on spec.stream marking when the input is ready, without
// waiting for it. Throws Error naming the tensor.
std::shared_ptr<GpuEvent> RecordGpuInputReady(const OpSpec& spec);

struct GpuCollectivesOptions {
  Communicator* communicator = nullptr;  // the process set's
  Topology topology;                     // the set's (rank and size within it)
  int32_t process_set_id = 0;
  int device = 0;  // this rank's tensor's device (joined ranks: the process's GPU)
  GpuOperations operations = GpuOperations::kNccl;
  double nccl_timeout_seconds = 0;
  Collectives* host = nullptr;  // runs the host copies when GPU tensors are staged
  PhaseRecorder* phases = nullptr;
};

// Made on the background thread at a process set's first GPU response: the CUDA
// stream, and (operations == kNccl) the set's NCCL communicator, built collectively
// through MPI. Throws Error.
std::unique_ptr<Collectives> MakeGpuCollectives(const GpuCollectivesOptions& options);

// Makes `stream` wait on a result's done event (cudaStreamWaitEvent, no host stall).
// Throws Error when CUDA refuses, or when the process's GPU path failed (a timed-out or
// broken communicator) before the event completed: the op's output is then undefined.
void GpuStreamWaitDone(const GpuEvent& done, void* stream);

// The device a process's GPU ops run on: that of its first device op, or -1 before it.
int BoundGpuDevice();

// lockstep's stream for GPU collectives of a process set on `device`, as a
// cudaStream_t; nullptr before the set's first GPU op.
void* GpuStreamOf(int device, int32_t process_set_id);

}  // namespace lockstep
