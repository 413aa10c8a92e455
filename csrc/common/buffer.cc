#include <cstdlib>
#include <new>

#include "lockstep/lockstep.h"

namespace lockstep {

// 64-byte alignment keeps vectorized copies and MPI's reductions on whole cache lines.
Buffer::Buffer(size_t bytes) : size_(bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Buffer::~Buffer() { std::free(data_); }

}  // namespace lockstep
