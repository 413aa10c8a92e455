// Process-wide CUDA state of the GPU backend: which GPU this process drives, reusable
// events, lockstep's streams (one per process set) and the CUDA error checks every
// GPU file uses.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/collectives.h"
#include "common/tensor_list.h"
#include "lockstep/values.h"

namespace lockstep {

// Throws Error("CUDA <what> failed for tensor(s) ...: <CUDA's message>").
void CheckCuda(cudaError_t status, const char* what, const std::vector<std::string>& names);

// Makes `device` current on this thread for the guard's lifetime. Never throws (it
// runs in destructors and releases); callers that go on to check CUDA results call
// Check(), so that a failure to switch is reported as that, not as whatever the next
// call returns.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  void Check(const std::vector<std::string>& names) const;

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

// Events without timing (cheaper to record), pooled per device: creating one is a
// driver call. Re-recording a pooled event is safe once every wait on it was issued,
// because a wait binds to the record that preceded it. Acquire throws Error.
cudaEvent_t AcquireEvent(int device);
void ReleaseEvent(int device, cudaEvent_t event);

// lockstep's own memory pool on `device` for stream-ordered allocations (fusion
// buffers, results): the device's default pool returns memory to the driver at every
// synchronization, which would make cudaMallocAsync pay a real allocation per op, and
// other libraries may tune that pool. Up to kPoolKeepBytes stay cached. Throws Error.
constexpr uint64_t kPoolKeepBytes = uint64_t{1} << 30;
cudaMemPool_t DevicePool(int device);

// The process's GPU path after a communicator failed or timed out where it could not be
// stopped safely (NCCL without ncclCommRevoke): every later GPU op of the process
// fails with this, naming the cause and saying to restart. "" while it works.
void MarkGpuPathFailed(const std::string& why);
std::string GpuPathFailure();

// The process's GPU: set by its first device op (Horovod pins one process per GPU),
// -1 before. Returns the bound device; throws Error when `device` is another one.
int BindGpu(int device, const OpSpec& spec);
int BoundGpu();

// lockstep's stream for one process set: non-blocking, so it is never ordered behind
// the legacy default stream that other libraries use. Shared by the set's collectives
// and by the device results still held by a frontend (their memory is freed on it),
// so it lives until the last of them is gone.
class DeviceStream {
 public:
  explicit DeviceStream(int device);  // throws Error
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

// For GpuStream(): the stream of each process set's GPU collectives.
void RegisterStream(int32_t process_set_id, std::shared_ptr<DeviceStream> stream);
void UnregisterStream(int32_t process_set_id);
std::shared_ptr<DeviceStream> RegisteredStream(int32_t process_set_id);

// The event marking a device op's input ready, recorded on its producer's stream.
// Numbered in recording order: events on one stream complete in that order, so
// waiting on a stream's highest-numbered event covers all of its earlier ones.
class GpuEvent {
 public:
  GpuEvent(int device, cudaEvent_t event, cudaStream_t stream, uint64_t sequence)
      : device_(device), event_(event), stream_(stream), sequence_(sequence) {}
  ~GpuEvent() { ReleaseEvent(device_, event_); }
  GpuEvent(const GpuEvent&) = delete;
  GpuEvent& operator=(const GpuEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  cudaStream_t stream() const { return stream_; }
  uint64_t sequence() const { return sequence_; }
  int device() const { return device_; }
  // A done event whose collective failed or was stopped before it finished: a stream
  // must not be ordered after it as if the output were valid. Thread-safe.
  void Fail(const std::string& why);
  std::string failure() const;

 private:
  int device_;
  cudaEvent_t event_;
  cudaStream_t stream_;
  uint64_t sequence_;
  mutable std::mutex failure_mutex_;
  std::string failure_;
};

// Records a pooled event on `stream` (with `device` current) and numbers it; recording
// and numbering happen under one lock, so numbers follow the order of the records even
// when threads share a stream. Throws Error.
std::shared_ptr<GpuEvent> RecordNumberedEvent(int device, cudaStream_t stream);

// The ready events lockstep's stream must wait on for these tensors: the latest of
// each producer stream (tensors without one are skipped).
std::vector<const GpuEvent*> LatestReadyPerStream(const std::vector<LocalTensor>& tensors);
// The distinct streams of these tensors' ops (each waits on the done event once).
std::vector<cudaStream_t> DistinctOpStreams(const std::vector<LocalTensor>& tensors);

}  // namespace lockstep
