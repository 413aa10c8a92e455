#include <cstdlib>
#include <new>
#include <utility>

#include "common/host_buffer_pool.h"
#include "lockstep/values.h"

namespace lockstep {

// 64-byte alignment keeps vectorized copies and MPI's reductions on whole cache lines.
// Large ones come from the process's pool of freed buffers (common/host_buffer_pool.h).
Buffer::Buffer(size_t bytes) : size_(bytes) {
  if (HostBufferPool::Pooled(bytes)) {
    data_ = HostBufferPool::Process().Take(bytes);
    release_ = [bytes](void* data) { HostBufferPool::Process().Give(data, bytes); };
    return;
  }
  size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Buffer::Buffer(void* data, size_t bytes, std::function<void(void*)> release)
    : data_(data), size_(bytes), release_(std::move(release)) {}

Buffer::~Buffer() {
  if (!release_) {
    std::free(data_);
    return;
  }
  // A destructor must not throw; a release that fails can only leak.
  try {
    release_(data_);
  } catch (...) {
  }
}

}  // namespace lockstep
