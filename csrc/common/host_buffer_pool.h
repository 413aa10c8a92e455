// Freed host result buffers of 128 KiB and more, kept for the next result of the
// same size class. glibc hands large freed blocks back to the kernel (munmap, or trimming
// the heap's top), so without this every fresh result faults its pages in again:
// at 2 ranks a 1 MiB numpy allreduce took 1640 us into a fresh array against 256 us
// into a reused one (docs/PERFORMANCE.md, "Result buffers").
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "lockstep/values.h"

namespace lockstep {

class HostBufferPool {
 public:
  // Smaller blocks come and go through malloc's own free lists at no such cost.
  static constexpr size_t kMinPooledBytes = kRecycledHostBufferBytes;
  static constexpr size_t kDefaultCapacityBytes = 128 * 1024 * 1024;

  // The process's pool: buffers may outlive the engine, the interpreter's modules and
  // static destructors, so it is created once and never destroyed.
  static HostBufferPool& Process();

  explicit HostBufferPool(size_t capacity_bytes = kDefaultCapacityBytes);
  ~HostBufferPool();
  HostBufferPool(const HostBufferPool&) = delete;
  HostBufferPool& operator=(const HostBufferPool&) = delete;

  static bool Pooled(size_t bytes) { return bytes >= kMinPooledBytes; }
  // What a block for `bytes` really holds: its size class, so near sizes share blocks.
  static size_t BlockBytes(size_t bytes);

  // `bytes` of memory, 64-byte aligned, in a block of BlockBytes(bytes) that is reused
  // when one is cached.
  void* Take(size_t bytes);
  // Caches the block Take(bytes) returned, freeing the oldest cached ones over capacity.
  void Give(void* data, size_t bytes);
  // Most bytes kept cached; 0 caches nothing (frees what is cached now).
  void SetCapacity(size_t bytes);
  // Frees every cached block; the capacity stays.
  void Release();
  size_t cached_bytes() const;

 private:
  struct Block {
    void* data;
    size_t bytes;
  };
  void EvictOverCapacity();  // with mutex_ held

  mutable std::mutex mutex_;
  size_t capacity_;
  size_t cached_ = 0;
  std::list<Block> age_;  // cached blocks, oldest first
  std::unordered_map<size_t, std::vector<std::list<Block>::iterator>> by_size_;  // oldest first
};

}  // namespace lockstep
