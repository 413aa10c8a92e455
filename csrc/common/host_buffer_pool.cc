#include "common/host_buffer_pool.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace lockstep {
namespace {

constexpr size_t kPageBytes = 4096;
// NumPy asks for transparent huge pages on arrays this large; a result that lived in
// a NumPy array before must not fault in 512 times as many pages now.
constexpr size_t kHugePageHintBytes = 4 * 1024 * 1024;
// Data starts this far into a block's first page. Measured at 2 ranks: MPI_Allreduce
// into a page-aligned 1 MiB result ran at half speed (517 against 227 us) whenever
// another page-aligned buffer of that size was in use, and at full speed 16 or 64
// bytes in, which is about where malloc puts NumPy's own large arrays.
constexpr size_t kLeadBytes = 64;

}  // namespace

HostBufferPool& HostBufferPool::Process() {
  static HostBufferPool* const pool = [] {
    auto* created = new HostBufferPool();
    // A fork while another thread holds the mutex must not leave the child's copy
    // locked forever (a forked DataLoader worker may free a result).
    pthread_atfork([] { Process().mutex_.lock(); }, [] { Process().mutex_.unlock(); },
                   [] { Process().mutex_.unlock(); });
    return created;
  }();
  return *pool;
}

HostBufferPool::HostBufferPool(size_t capacity_bytes) : capacity_(capacity_bytes) {}

HostBufferPool::~HostBufferPool() {
  for (const Block& block : age_) std::free(block.data);
}

// Four size classes per power of two: results whose sizes differ a little (a soak's
// random shapes, a last partial batch) share blocks, at most a quarter of a block
// unused. Exact sizes filled the cache with blocks no later request could take.
size_t HostBufferPool::BlockBytes(size_t bytes) {
  const size_t needed = bytes + kLeadBytes;
  size_t step = kPageBytes;
  if (needed > 4 * kPageBytes) {
    const int top = 63 - __builtin_clzll(needed - 1);  // 2^top < needed <= 2^(top + 1)
    step = std::max(kPageBytes, (size_t{1} << top) / 4);
  }
  return (needed + step - 1) / step * step;
}

void* HostBufferPool::Take(size_t bytes) {
  const size_t block_bytes = BlockBytes(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = by_size_.find(block_bytes);
    if (found != by_size_.end()) {  // never holds an empty list
      // The most recently cached block of this size: its pages are the likeliest warm.
      const auto block = found->second.back();
      found->second.pop_back();
      if (found->second.empty()) by_size_.erase(found);  // as eviction does
      void* start = block->data;
      cached_ -= block_bytes;
      age_.erase(block);
      return static_cast<char*>(start) + kLeadBytes;
    }
  }
  void* start = std::aligned_alloc(kPageBytes, block_bytes);
  if (start == nullptr) throw std::bad_alloc();
  if (block_bytes >= kHugePageHintBytes) madvise(start, block_bytes, MADV_HUGEPAGE);  // a hint
  return static_cast<char*>(start) + kLeadBytes;
}

void HostBufferPool::Give(void* data, size_t bytes) {
  const size_t block_bytes = BlockBytes(bytes);
  void* start = static_cast<char*>(data) - kLeadBytes;
  std::lock_guard<std::mutex> lock(mutex_);
  if (block_bytes > capacity_) {
    std::free(start);
    return;
  }
  by_size_[block_bytes].push_back(age_.insert(age_.end(), Block{start, block_bytes}));
  cached_ += block_bytes;
  EvictOverCapacity();
}

void HostBufferPool::SetCapacity(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = bytes;
  EvictOverCapacity();
}

void HostBufferPool::Release() {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t capacity = capacity_;
  capacity_ = 0;
  EvictOverCapacity();
  capacity_ = capacity;
}

size_t HostBufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

void HostBufferPool::EvictOverCapacity() {
  while (cached_ > capacity_) {
    const Block oldest = age_.front();
    auto& same_size = by_size_[oldest.bytes];
    same_size.erase(same_size.begin());  // the oldest of its size is the list's oldest too
    if (same_size.empty()) by_size_.erase(oldest.bytes);
    age_.pop_front();
    cached_ -= oldest.bytes;
    std::free(oldest.data);
  }
}

}  // namespace lockstep
