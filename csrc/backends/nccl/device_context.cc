#include "backends/nccl/device_context.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "backends/nccl/batched_copy.h"
#include "backends/nccl/scale_kernels.h"

namespace lockstep {
namespace {

struct EventPool {
  std::mutex mutex;
  std::map<int, std::vector<cudaEvent_t>> free_by_device;
};

EventPool& Pool() {
  static EventPool* pool = new EventPool();  // never destroyed: events may return at exit
  return *pool;
}

std::atomic<int>& Bound() {
  static std::atomic<int> device{-1};
  return device;
}

struct PoolRegistry {
  std::mutex mutex;
  std::map<int, cudaMemPool_t> by_device;
};

PoolRegistry& Pools() {
  static PoolRegistry* pools = new PoolRegistry();  // pools live as long as the process
  return *pools;
}

struct StreamRegistry {
  std::mutex mutex;
  std::map<int32_t, std::shared_ptr<DeviceStream>> by_set;
};

StreamRegistry& Registry() {
  static StreamRegistry* registry = new StreamRegistry();
  return *registry;
}

}  // namespace

void CheckCuda(cudaError_t status, const char* what, const std::vector<std::string>& names) {
  if (status == cudaSuccess) return;
  throw Error(std::string("CUDA ") + what + " failed" +
              (names.empty() ? std::string() : " for tensor(s) " + TensorList(names)) + ": " +
              cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ == device) {
    previous_ = -1;  // nothing to restore
    return;
  }
  status_ = cudaSetDevice(device);
  // Read and cleared here, so a later launch check does not mistake it for its own.
  if (status_ != cudaSuccess) (void)cudaGetLastError();
}

DeviceGuard::~DeviceGuard() {
  // Restoring is best effort (a destructor must not throw); its error is cleared so that
  // it cannot surface as a later call's failure on this thread.
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

void DeviceGuard::Check(const std::vector<std::string>& names) const {
  CheckCuda(status_, "cudaSetDevice", names);
}

void GpuEvent::Fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  if (failure_.empty()) failure_ = why;
}

std::string GpuEvent::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

cudaEvent_t AcquireEvent(int device) {
  {
    EventPool& pool = Pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    std::vector<cudaEvent_t>& free = pool.free_by_device[device];
    if (!free.empty()) {
      cudaEvent_t event = free.back();
      free.pop_back();
      return event;
    }
  }
  DeviceGuard guard(device);
  guard.Check({});
  cudaEvent_t event = nullptr;
  CheckCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "event creation", {});
  return event;
}

void ReleaseEvent(int device, cudaEvent_t event) {
  if (event == nullptr) return;
  EventPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.free_by_device[device].push_back(event);
}

cudaMemPool_t DevicePool(int device) {
  PoolRegistry& pools = Pools();
  std::lock_guard<std::mutex> lock(pools.mutex);
  auto it = pools.by_device.find(device);
  if (it != pools.by_device.end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  CheckCuda(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate", {});
  uint64_t keep = kPoolKeepBytes;
  CheckCuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
            "cudaMemPoolSetAttribute (release threshold)", {});
  pools.by_device[device] = pool;
  return pool;
}

namespace {

struct PathFailure {
  std::mutex mutex;
  std::string why;
};

PathFailure& Path() {
  static PathFailure* path = new PathFailure();
  return *path;
}

}  // namespace

void MarkGpuPathFailed(const std::string& why) {
  std::lock_guard<std::mutex> lock(Path().mutex);
  if (Path().why.empty()) Path().why = why;
}

std::string GpuPathFailure() {
  std::lock_guard<std::mutex> lock(Path().mutex);
  return Path().why;
}

int BindGpu(int device, const OpSpec& spec) {
  int expected = -1;
  if (Bound().compare_exchange_strong(expected, device) || expected == device) return device;
  throw Error(std::string(OpTypeName(spec.op)) + " of tensor '" + spec.name +
                  "': the tensor is on GPU " + std::to_string(device) +
                  ", but this process runs its GPU collectives on GPU " + std::to_string(expected) +
                  " (one process per GPU, as in Horovod: pin each rank to its GPU, e.g. "
                  "torch.cuda.set_device(local_rank()), and keep its tensors there)",
              Status::Code::kInvalidArgument);
}

int BoundGpu() { return Bound().load(); }

DeviceStream::DeviceStream(int device) : device_(device) {
  DeviceGuard guard(device);
  guard.Check({});
  CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream creation", {});
  // Loaded with the stream, before any collective can be in flight (scale_kernels.h).
  // Best effort: a kernel that cannot load fails its first launch, naming the op.
  (void)LoadScaleKernels();
  (void)LoadBatchedCopyKernels();
  (void)cudaGetLastError();
}

DeviceStream::~DeviceStream() {
  // Asynchronous: work still queued on the stream completes first.
  DeviceGuard guard(device_);
  (void)cudaStreamDestroy(stream_);
}

void RegisterStream(int32_t process_set_id, std::shared_ptr<DeviceStream> stream) {
  StreamRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.by_set[process_set_id] = std::move(stream);
}

void UnregisterStream(int32_t process_set_id) {
  StreamRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.by_set.erase(process_set_id);
}

std::shared_ptr<DeviceStream> RegisteredStream(int32_t process_set_id) {
  StreamRegistry& registry = Registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.by_set.find(process_set_id);
  return it == registry.by_set.end() ? nullptr : it->second;
}

std::shared_ptr<GpuEvent> RecordNumberedEvent(int device, cudaStream_t stream) {
  static std::mutex* order = new std::mutex();
  static uint64_t recorded = 0;  // guarded by *order
  cudaEvent_t event = AcquireEvent(device);
  cudaError_t status;
  uint64_t sequence;
  {
    std::lock_guard<std::mutex> lock(*order);
    status = cudaEventRecord(event, stream);
    sequence = ++recorded;
  }
  if (status != cudaSuccess) {
    ReleaseEvent(device, event);
    CheckCuda(status, "cudaEventRecord", {});
  }
  return std::make_shared<GpuEvent>(device, event, stream, sequence);
}

std::vector<const GpuEvent*> LatestReadyPerStream(const std::vector<LocalTensor>& tensors) {
  std::vector<const GpuEvent*> latest;
  for (const LocalTensor& tensor : tensors) {
    const GpuEvent* ready = tensor.ready;
    if (ready == nullptr) continue;
    auto same = std::find_if(latest.begin(), latest.end(),
                             [ready](const GpuEvent* e) { return e->stream() == ready->stream(); });
    if (same == latest.end()) {
      latest.push_back(ready);
    } else if (ready->sequence() > (*same)->sequence()) {
      *same = ready;
    }
  }
  return latest;
}

std::vector<cudaStream_t> DistinctOpStreams(const std::vector<LocalTensor>& tensors) {
  std::vector<cudaStream_t> streams;
  for (const LocalTensor& tensor : tensors) {
    if (tensor.spec == nullptr) continue;
    auto stream = static_cast<cudaStream_t>(tensor.spec->stream);
    if (std::find(streams.begin(), streams.end(), stream) == streams.end()) {
      streams.push_back(stream);
    }
  }
  return streams;
}

}  // namespace lockstep
