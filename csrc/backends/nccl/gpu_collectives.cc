// The GPU collectives of one process set (backends/gpu_collectives.h): lockstep's
// stream waits for each input's ready event, NCCL (or MPI staging) runs the response,
// a done event is recorded and every op's stream is made to wait on it, and the
// handles complete without the host waiting for the GPU. Failures that surface later
// (an asynchronous NCCL error, a collective past the timeout) abort the communicator
// and fail the set's later GPU ops, naming the tensors.
#include "backends/gpu_collectives.h"

#include <chrono>

#include "backends/gpu_info.h"
#include "backends/mpi/mpi_communicator.h"
#include "backends/nccl/device_context.h"
#include "backends/nccl/gpu_phases.h"
#include "backends/nccl/gpu_probe.h"
#include "backends/nccl/inflight.h"
#include "backends/nccl/nccl_communicator.h"
#include "backends/nccl/nccl_ops.h"
#include "backends/nccl/nccl_types.h"
#include "backends/nccl/staged_ops.h"

namespace lockstep {
namespace {

// How long shutting down waits for queued GPU work before aborting the communicator
// (a peer that died would otherwise keep it waiting forever).
constexpr double kShutdownDrainSeconds = 10.0;

class DeviceCollectives : public Collectives {
 public:
  // The local part: device, stream, staging. Throws Error.
  explicit DeviceCollectives(const GpuCollectivesOptions& options);
  ~DeviceCollectives() override;
  // The collective part (options.operations == kNccl): the set's communicator.
  void Connect();
  std::vector<OpResult> Run(const Response& response,
                            const std::vector<LocalTensor>& tensors) override;
  std::string Poll() override;

 private:
  std::vector<OpResult> RunOnStream(const Response& r, const std::vector<LocalTensor>& tensors);
  void Break(const std::string& why);

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

DeviceCollectives::DeviceCollectives(const GpuCollectivesOptions& options)
    : options_(options),
      device_(options.device),
      stream_((CheckCuda(cudaSetDevice(options.device), "cudaSetDevice", {}),
               std::make_shared<DeviceStream>(options.device))),
      phase_timer_(options.device, options.phases),
      staged_(*options.host, stream_, phase_timer_),
      inflight_(options.device, options.nccl_timeout_seconds) {
  if (options.operations == GpuOperations::kNccl && !LoadNcclLibrary().loaded) {
    throw Error("GPU collectives cannot use NCCL: " + LoadNcclLibrary().load_error);
  }
  RegisterStream(options.process_set_id, stream_);
}

void DeviceCollectives::Connect() {
  if (options_.operations != GpuOperations::kNccl) return;
  const NcclLibrary& library = LoadNcclLibrary();
  comm_ =
      std::make_unique<NcclCommunicator>(MpiCommunicator::HandleOf(*options_.communicator),
                                         options_.topology.rank, options_.topology.size, library);
  nccl_ = std::make_unique<NcclOps>(library, *comm_, stream_, options_.topology, phase_timer_);
}

DeviceCollectives::~DeviceCollectives() {
  UnregisterStream(options_.process_set_id);
  // Possibly on a user's thread (the engine is destroyed where Shutdown is called):
  // leave its current device as it was.
  DeviceGuard guard(device_);
  if (comm_ && !comm_->aborted() && !inflight_.Drain(kShutdownDrainSeconds)) comm_->Abort();
}

void DeviceCollectives::Break(const std::string& why) {
  broken_ = why;
  if (comm_) comm_->Abort();
}

std::vector<OpResult> DeviceCollectives::Run(const Response& r,
                                             const std::vector<LocalTensor>& tensors) {
  if (!broken_.empty()) {
    throw Error("GPU collective on tensor(s) " + TensorList(r.names) +
                " not run: this process set's GPU collectives stopped earlier: " + broken_);
  }
  CheckCuda(cudaSetDevice(device_), "cudaSetDevice", r.names);
  for (const LocalTensor& tensor : tensors) {
    if (tensor.spec != nullptr && tensor.spec->device != device_) {
      throw Error(std::string(OpTypeName(tensor.spec->op)) + " of tensor '" + tensor.spec->name +
                  "': the tensor is on GPU " + std::to_string(tensor.spec->device) +
                  ", but this process set's GPU collectives run on GPU " + std::to_string(device_));
    }
  }
  try {
    return RunOnStream(r, tensors);
  } catch (const Error& e) {
    // Peers may have queued their part of this collective already; this rank's NCCL
    // calls would no longer pair with theirs, so the communicator cannot be trusted.
    Break(e.what());
    throw;
  }
}

std::vector<OpResult> DeviceCollectives::RunOnStream(const Response& r,
                                                     const std::vector<LocalTensor>& tensors) {
  cudaStream_t stream = stream_->get();
  phase_timer_.Mark(stream, "GPU_WAIT_FOR_INPUT");
  // One wait per producer stream (a fused response of a backward pass has one), not
  // one per tensor: each costs the background thread a driver call.
  for (const GpuEvent* ready : LatestReadyPerStream(tensors)) {
    CheckCuda(cudaStreamWaitEvent(stream, ready->get(), 0), "cudaStreamWaitEvent (input ready)",
              r.names);
  }
  const auto queued = InflightCollectives::Clock::now();
  std::vector<OpResult> results =
      nccl_ && WhyStaged(r).empty() ? nccl_->Run(r, tensors) : staged_.Run(r, tensors);
  phase_timer_.Finish(stream, r.names);
  cudaEvent_t done = AcquireEvent(device_);
  inflight_.Add(done, r.names, queued);  // owns the event from here
  CheckCuda(cudaEventRecord(done, stream), "cudaEventRecord (done)", r.names);
  // The op's stream waits for lockstep's work before anything queued on it later:
  // when the handle completes the framework may use the output on that stream.
  for (cudaStream_t op_stream : DistinctOpStreams(tensors)) {
    CheckCuda(cudaStreamWaitEvent(op_stream, done, 0),
              "cudaStreamWaitEvent (op's stream after lockstep's)", r.names);
  }
  return results;
}

std::string DeviceCollectives::Poll() {
  if (!broken_.empty()) return "";  // reported when it happened
  (void)cudaSetDevice(device_);
  phase_timer_.Poll();
  std::string failure = inflight_.Poll(InflightCollectives::Clock::now());
  if (failure.empty() && comm_) {
    const ncclResult_t async = comm_->AsyncError();
    if (async != ncclSuccess && async != ncclInProgress) {
      failure = DescribeNcclFailure(async, "communicator (asynchronous error)",
                                    inflight_.PendingNames(), LoadNcclLibrary());
    }
  }
  if (failure.empty()) return "";
  Break(failure);
  return "GPU collectives stopped: " + failure +
         (comm_ ? "; the NCCL communicator was aborted" : "") +
         "; this process set's later GPU ops fail, host ops keep working";
}

}  // namespace

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
  int ready = local_failure.empty() ? 1 : 0;
  const int status = MPI_Allreduce(MPI_IN_PLACE, &ready, 1, MPI_INT, MPI_MIN,
                                   MpiCommunicator::HandleOf(*options.communicator));
  if (status != MPI_SUCCESS) {
    throw Error("GPU collectives: MPI_Allreduce failed (MPI error " + std::to_string(status) + ")");
  }
  if (!ready) {
    throw Error("GPU collectives could not start on every rank of the process set: " +
                (local_failure.empty() ? std::string("another rank failed (see its error)")
                                       : local_failure));
  }
  made->Connect();
  return made;
}

int BoundGpuDevice() { return BoundGpu(); }

void* GpuStreamOf(int device, int32_t process_set_id) {
  std::shared_ptr<DeviceStream> stream = RegisteredStream(process_set_id);
  return stream && stream->device() == device ? stream->get() : nullptr;
}

}  // namespace lockstep
