#include "backends/nccl/device_collectives.h"

#include "backends/gpu_agreement.h"
#include "backends/mpi/mpi_communicator.h"
#include "backends/nccl/nccl_types.h"

namespace lockstep {
namespace {

// How long shutting down waits for queued GPU work, and then for the other members'
// answer on whether theirs drained too (a peer that died would otherwise keep it
// waiting forever).
constexpr double kShutdownDrainSeconds = 10.0;
constexpr double kShutdownAgreementSeconds = 10.0;
constexpr const char* kRestart =
    "; the GPU path of this process cannot be trusted any more: restart the job (host ops keep "
    "working)";

}  // namespace

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
  comm_ = std::make_unique<NcclCommunicator>(MpiCommunicator::HandleOf(*options_.communicator),
                                             options_.topology.rank, options_.topology.size,
                                             library, options_.nccl_timeout_seconds);
  nccl_ = std::make_unique<NcclOps>(library, *comm_, stream_, options_.topology, phase_timer_);
}

DeviceCollectives::~DeviceCollectives() {
  UnregisterStream(options_.process_set_id);
  // Possibly on a user's thread (the engine is destroyed where Shutdown is called):
  // leave its current device as it was.
  DeviceGuard guard(device_);
  CloseCommunicator();
}

void DeviceCollectives::CloseCommunicator() {
  if (!comm_) return;
  // Every member takes part, also one whose communicator is already gone (aborted after
  // a failure): the others learn from it that not all drained, without waiting out the
  // deadline.
  const bool drained = broken_.empty() && inflight_.Drain(kShutdownDrainSeconds);
  const Agreement all_drained = AgreeAllOk(MpiCommunicator::HandleOf(*options_.communicator),
                                           drained, DeadlineIn(kShutdownAgreementSeconds),
                                           "agreeing on shutting the NCCL communicator down");
  if (comm_->released()) return;
  switch (OnShutdown(all_drained, comm_->revoke_available(), inflight_.empty())) {
    case ShutdownAction::kDestroy:
      comm_->Destroy();
      break;
    case ShutdownAction::kRevokeDrainDestroy:
      if (!comm_->Revoke()) {
        comm_->Leave();
        break;
      }
      (void)inflight_.Drain(kShutdownDrainSeconds);
      (void)comm_->DestroyRevoked();
      break;
    case ShutdownAction::kAbort:
      comm_->Abort();
      break;
    case ShutdownAction::kLeave:
      comm_->Leave();
      break;
  }
}

void DeviceCollectives::ThrowIfStopped(const Response& r) {
  std::string why = GpuPathFailure();  // says to restart
  if (why.empty()) why = broken_;
  if (why.empty()) {
    // The watchdog may have found a failure since the last Poll.
    const std::string found = inflight_.failure();
    if (!found.empty()) why = Stop(found, inflight_.size() > 1);
  }
  if (why.empty()) return;
  throw Error("GPU collective on tensor(s) " + TensorList(r.names) +
              " not run: this process set's GPU collectives stopped earlier: " + why);
}

std::vector<OpResult> DeviceCollectives::Run(const Response& r,
                                             const std::vector<LocalTensor>& tensors) {
  ThrowIfStopped(r);
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
    // calls would no longer pair with theirs, so the communicator cannot be trusted,
    // and part of this response may be queued on lockstep's stream.
    Stop(e.what(), /*work_queued_behind=*/true);
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
  // The timeout counts from here: time spent waiting for inputs is not the collective's.
  cudaEvent_t start = AcquireEvent(device_);
  const cudaError_t started = cudaEventRecord(start, stream);
  if (started != cudaSuccess) ReleaseEvent(device_, start);
  CheckCuda(started, "cudaEventRecord (start)", r.names);
  std::vector<OpResult> results;
  try {
    results = nccl_ && WhyStaged(r).empty() ? nccl_->Run(r, tensors) : staged_.Run(r, tensors);
  } catch (...) {
    ReleaseEvent(device_, start);
    throw;
  }
  phase_timer_.Finish(stream, r.names);
  auto done = std::make_shared<GpuEvent>(device_, AcquireEvent(device_), stream, 0);
  const cudaError_t recorded = cudaEventRecord(done->get(), stream);
  inflight_.Add(start, done, r.names);  // owns the start event from here
  CheckCuda(recorded, "cudaEventRecord (done)", r.names);
  // The op's stream waits on `done` when the frontend takes the result (HandleTable),
  // so that the framework's work queued meanwhile is not held behind the collective.
  for (size_t i = 0; i < tensors.size() && i < results.size(); ++i) {
    if (tensors[i].spec == nullptr) continue;
    results[i].gpu_done = done;
    results[i].gpu_stream = tensors[i].spec->stream;
  }
  return results;
}

std::string DeviceCollectives::Poll() {
  if (!broken_.empty()) return "";  // reported when it happened
  const cudaError_t selected = cudaSetDevice(device_);
  std::string failure = selected == cudaSuccess ? inflight_.failure()
                                                : std::string("CUDA cudaSetDevice failed: ") +
                                                      cudaGetErrorName(selected);
  phase_timer_.Poll();
  if (failure.empty() && comm_) {
    const ncclResult_t async = comm_->AsyncError();
    if (async != ncclSuccess && async != ncclInProgress) {
      failure = DescribeNcclFailure(async, "communicator (asynchronous error)",
                                    inflight_.PendingNames(), LoadNcclLibrary());
    }
  }
  if (failure.empty()) return "";
  return "GPU collectives stopped: " + Stop(failure, inflight_.size() > 1);
}

// Every pending and later GPU op of the process fails with the returned message.
std::string DeviceCollectives::FailGpuPath(const std::string& what_happened) {
  MarkGpuPathFailed(what_happened + kRestart);
  return GpuPathFailure();
}

std::string DeviceCollectives::Stop(const std::string& why, bool work_queued_behind) {
  broken_ = inflight_.Fail(why);
  if (!comm_ || comm_->released()) return broken_;
  const FailureAction action = OnCommunicatorFailure(comm_->revoke_available(), work_queued_behind);
  switch (action) {
    case FailureAction::kRevokeDrainDestroy:
      if (!comm_->Revoke()) {
        comm_->Leave();
        return FailGpuPath(broken_ + "; revoking the NCCL communicator failed");
      }
      if (inflight_.Drain(kShutdownDrainSeconds) && comm_->DestroyRevoked()) {
        return broken_ + "; the NCCL communicator was " + ActionName(action) +
               "; this process set's later GPU ops fail, host ops and other sets keep working";
      }
      comm_->Leave();  // still not quiescent: destroying could free memory in use
      return FailGpuPath(broken_ +
                         "; the NCCL communicator was revoked but did not become quiescent");
    case FailureAction::kAbort:
      comm_->Abort();
      return FailGpuPath(broken_ + "; the NCCL communicator was " + ActionName(action));
    case FailureAction::kLeave:
      comm_->Leave();
      return FailGpuPath(broken_ + "; the NCCL communicator was " + ActionName(action));
  }
  return broken_;
}

}  // namespace lockstep
