// The GPU side of the seam (backends/gpu_collectives.h) in builds with the NCCL
// backend: the factory of a set's DeviceCollectives and the functions frontends reach
// through the engine (input ready events, ordering a stream after a result).
#include "backends/gpu_collectives.h"

#include "backends/gpu_agreement.h"
#include "backends/gpu_info.h"
#include "backends/mpi/mpi_communicator.h"
#include "backends/nccl/device_collectives.h"
#include "backends/nccl/gpu_probe.h"
#include "backends/nccl/nccl_library.h"

namespace lockstep {

std::string GpuUnavailableReason(const Config& config) {
  const NcclInfo info = QueryNcclInfo();
  if (info.cuda_devices == 0) return info.problem;  // no driver or no GPU
  if (config.gpu_operations_set && config.gpu_operations == GpuOperations::kNccl &&
      !LoadNcclLibrary().loaded) {
    return "LOCKSTEP_GPU_OPERATIONS=nccl, but " + LoadNcclLibrary().load_error +
           " (unset it to run GPU tensors through MPI instead)";
  }
  return "";
}

std::shared_ptr<GpuEvent> RecordGpuInputReady(const OpSpec& spec) {
  const int device = BindGpu(spec.device, spec);
  DeviceGuard guard(device);
  try {
    return RecordNumberedEvent(device, static_cast<cudaStream_t>(spec.stream));
  } catch (const Error& e) {
    throw Error(std::string(OpTypeName(spec.op)) + " of tensor '" + spec.name +
                    "': cannot record its ready event on GPU " + std::to_string(device) +
                    " (is the stream on that GPU?): " + e.what(),
                Status::Code::kInvalidArgument);
  }
}

std::unique_ptr<Collectives> MakeGpuCollectives(const GpuCollectivesOptions& options) {
  GpuCollectivesOptions effective = options;
  // Without libnccl GPU tensors go through MPI staging, unless nccl was asked for by
  // name, in which case GpuUnavailableReason already refused them at submission.
  if (!LoadNcclLibrary().loaded) effective.operations = GpuOperations::kMpi;
  std::unique_ptr<DeviceCollectives> made;
  std::string local_failure;
  try {
    made = std::make_unique<DeviceCollectives>(effective);
  } catch (const Error& e) {
    local_failure = e.what();
  }
  // Every member agrees before anything collective: a member that failed locally (a
  // bad device, no memory for a stream) must not leave the others waiting in the
  // unique id's broadcast, and all of them then refuse the set's GPU ops alike.
  const Agreement ready = AgreeAllOk(
      MpiCommunicator::HandleOf(*options.communicator), local_failure.empty(),
      DeadlineIn(options.nccl_timeout_seconds), "agreeing on starting the GPU collectives");
  if (!ready.reached || !ready.all_ok) {
    throw Error("GPU collectives could not start on every rank of the process set: " +
                (!local_failure.empty() ? local_failure
                 : ready.reached        ? std::string("another rank failed (see its error)")
                                        : ready.problem));
  }
  made->Connect();
  return made;
}

void GpuStreamWaitDone(const GpuEvent& done, void* stream) {
  std::string failure = done.failure();
  const std::string path_failure = GpuPathFailure();  // says to restart
  if (!path_failure.empty()) {
    // Finished before the failure: its output is valid. Otherwise it never will be.
    DeviceGuard guard(done.device());
    if (!failure.empty() || cudaEventQuery(done.get()) != cudaSuccess) failure = path_failure;
  }
  if (!failure.empty()) {
    throw Error("the GPU collective of this op did not complete, its output is undefined: " +
                failure);
  }
  DeviceGuard guard(done.device());
  guard.Check({});
  CheckCuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), done.get(), 0),
            "cudaStreamWaitEvent (a stream after lockstep's work)", {});
}

int BoundGpuDevice() { return BoundGpu(); }

void* GpuStreamOf(int device, int32_t process_set_id) {
  std::shared_ptr<DeviceStream> stream = RegisteredStream(process_set_id);
  return stream && stream->device() == device ? stream->get() : nullptr;
}

}  // namespace lockstep
