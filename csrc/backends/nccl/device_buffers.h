// Memory of the GPU collectives: the device fusion buffer (grow-only scratch ordered
// on lockstep's stream), device results handed to frontends, and the pinned host
// buffer of MPI staging.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/nccl/device_context.h"

namespace lockstep {

// Stream-ordered scratch: allocated and freed with cudaMallocAsync/cudaFreeAsync on
// lockstep's stream, so work already queued on it keeps the old memory valid until it
// is done, and the host never waits.
class DeviceScratch {
 public:
  explicit DeviceScratch(std::shared_ptr<DeviceStream> stream) : stream_(std::move(stream)) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  // At least `bytes` bytes (valid for work queued on the stream from now on); throws
  // Error naming `names`.
  void* Get(int64_t bytes, const std::vector<std::string>& names);

 private:
  std::shared_ptr<DeviceStream> stream_;
  void* data_ = nullptr;
  int64_t capacity_ = 0;
};

// A result of `bytes` bytes in device memory, allocated on lockstep's stream. Its
// release is stream-ordered after the consumer: an event recorded on
// `consumer_stream` (the op's stream, on which the frontend copies the result out)
// when the last owner drops it, lockstep's stream waits on it, then frees. Throws Error.
std::shared_ptr<Buffer> DeviceResult(int64_t bytes, const std::shared_ptr<DeviceStream>& stream,
                                     void* consumer_stream, const std::vector<std::string>& names);

// Grow-only page-locked host memory, so copies to and from the device are true DMA.
// Growing waits for `stream` first: copies queued on it may still read the old memory.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  char* Get(int64_t bytes, cudaStream_t stream, const std::vector<std::string>& names);

 private:
  void* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace lockstep
