#include <cstdlib>
#include <new>
#include <utility>

#include "lockstep/lockstep.h"

namespace lockstep {

// 64-byte alignment keeps vectorized copies and MPI's reductions on whole cache lines.
Buffer::Buffer(size_t bytes) : size_(bytes) {
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
