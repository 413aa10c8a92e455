#include "backends/nccl/device_buffers.h"

namespace lockstep {
namespace {

int64_t RoundUp(int64_t bytes, int64_t unit) { return (bytes + unit - 1) / unit * unit; }

}  // namespace

DeviceScratch::~DeviceScratch() {
  if (data_ == nullptr) return;
  DeviceGuard guard(stream_->device());
  (void)cudaFreeAsync(data_, stream_->get());
}

void* DeviceScratch::Get(int64_t bytes, const std::vector<std::string>& names) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  if (data_ != nullptr) {
    CheckCuda(cudaFreeAsync(data_, stream_->get()), "cudaFreeAsync (fusion buffer)", names);
    data_ = nullptr;
    capacity_ = 0;
  }
  const int64_t rounded = RoundUp(std::max<int64_t>(bytes, 1), 1 << 20);
  CheckCuda(cudaMallocFromPoolAsync(&data_, static_cast<size_t>(rounded),
                                    DevicePool(stream_->device()), stream_->get()),
            ("cudaMallocAsync of a " + std::to_string(rounded) + "-byte fusion buffer").c_str(),
            names);
  capacity_ = rounded;
  return data_;
}

std::shared_ptr<Buffer> DeviceResult(int64_t bytes, const std::shared_ptr<DeviceStream>& stream,
                                     void* consumer_stream, const std::vector<std::string>& names) {
  if (bytes == 0) return std::make_shared<Buffer>(nullptr, 0, [](void*) {});
  void* data = nullptr;
  CheckCuda(cudaMallocFromPoolAsync(&data, static_cast<size_t>(bytes), DevicePool(stream->device()),
                                    stream->get()),
            ("cudaMallocAsync of a " + std::to_string(bytes) + "-byte result").c_str(), names);
  // Runs on whichever thread drops the last reference (a frontend's, usually); only
  // asynchronous calls, errors ignored: at worst the memory leaks.
  auto release = [stream, consumer = static_cast<cudaStream_t>(consumer_stream)](void* memory) {
    DeviceGuard guard(stream->device());
    cudaEvent_t consumed = nullptr;
    try {
      consumed = AcquireEvent(stream->device());
    } catch (const Error&) {
      return;  // cannot order the free after the consumer: leak rather than corrupt
    }
    const bool ordered = cudaEventRecord(consumed, consumer) == cudaSuccess &&
                         cudaStreamWaitEvent(stream->get(), consumed, 0) == cudaSuccess;
    ReleaseEvent(stream->device(), consumed);
    if (ordered) (void)cudaFreeAsync(memory, stream->get());
  };
  return std::make_shared<Buffer>(data, static_cast<size_t>(bytes), std::move(release));
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
}

char* PinnedBuffer::Get(int64_t bytes, cudaStream_t stream, const std::vector<std::string>& names) {
  if (bytes > capacity_ || data_ == nullptr) {
    if (data_ != nullptr) {
      CheckCuda(cudaStreamSynchronize(stream), "stream synchronization (staging)", names);
      CheckCuda(cudaFreeHost(data_), "cudaFreeHost (staging buffer)", names);
      data_ = nullptr;
      capacity_ = 0;
    }
    const int64_t rounded = RoundUp(std::max<int64_t>(bytes, 1), 1 << 20);
    CheckCuda(cudaHostAlloc(&data_, static_cast<size_t>(rounded), cudaHostAllocDefault),
              ("cudaHostAlloc of a " + std::to_string(rounded) + "-byte staging buffer").c_str(),
              names);
    capacity_ = rounded;
  }
  return static_cast<char*>(data_);
}

}  // namespace lockstep
