// The cache of freed large host buffers: same-size reuse, the capacity bound and its
// eviction order, and Buffer's use of the process's pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "common/host_buffer_pool.h"
#include "lockstep/values.h"

namespace lockstep {
namespace {

constexpr size_t kMiB = 1024 * 1024;
const size_t kBlock = HostBufferPool::BlockBytes(kMiB);  // a 1 MiB buffer's whole block

TEST(HostBufferPool, AFreedBlockServesTheNextRequestOfItsPageRoundedSize) {
  EXPECT_EQ(kBlock % 4096, 0u);
  EXPECT_GT(kBlock, kMiB);
  HostBufferPool pool(8 * kMiB);
  void* first = pool.Take(kMiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  EXPECT_NE(reinterpret_cast<uintptr_t>(first) % 4096, 0u);  // see kLeadBytes
  std::memset(first, 1, kMiB);                               // the whole block is usable
  pool.Give(first, kMiB);
  EXPECT_EQ(pool.cached_bytes(), kBlock);
  EXPECT_EQ(pool.Take(kMiB + 100), first);  // rounds up to the same pages
  EXPECT_EQ(pool.cached_bytes(), 0u);
  void* other = pool.Take(kMiB);  // nothing cached now: a new block
  EXPECT_NE(other, first);
  pool.Give(first, kMiB);
  pool.Give(other, kMiB);
  void* larger = pool.Take(2 * kMiB);  // no block of that size is cached
  EXPECT_NE(larger, first);
  EXPECT_NE(larger, other);
  EXPECT_EQ(pool.Take(kMiB), other);  // the most recently cached of a size first
  pool.Give(other, kMiB);
  pool.Give(larger, 2 * kMiB);
}

TEST(HostBufferPool, SizesShareBlocksInClassesOfAQuarterOfAPowerOfTwo) {
  for (size_t bytes = 1; bytes < 64 * kMiB; bytes = bytes * 9 / 8 + 1) {
    const size_t block = HostBufferPool::BlockBytes(bytes);
    EXPECT_EQ(block % 4096, 0u) << bytes;
    EXPECT_GE(block, bytes + 64) << bytes;  // the data starts 64 bytes in
    EXPECT_LE(block, std::max<size_t>(4096, (bytes + 64) * 5 / 4 + 4096)) << bytes;
  }
  EXPECT_EQ(HostBufferPool::BlockBytes(kMiB), HostBufferPool::BlockBytes(kMiB + 200 * 1024));
  EXPECT_LT(HostBufferPool::BlockBytes(kMiB), HostBufferPool::BlockBytes(kMiB + 300 * 1024));
  HostBufferPool pool(8 * kMiB);
  void* block = pool.Take(kMiB + 200 * 1024);
  pool.Give(block, kMiB + 200 * 1024);
  EXPECT_EQ(pool.Take(kMiB), block);  // a smaller result of the same class reuses it
  pool.Give(block, kMiB);
}

TEST(HostBufferPool, KeepsAtMostItsCapacityFreeingTheOldestFirst) {
  HostBufferPool pool(2 * kBlock);
  void* a = pool.Take(kMiB);
  void* b = pool.Take(kMiB);
  void* c = pool.Take(kMiB);
  pool.Give(a, kMiB);
  pool.Give(b, kMiB);
  pool.Give(c, kMiB);  // over capacity: `a`, the oldest, is freed
  EXPECT_EQ(pool.cached_bytes(), 2 * kBlock);
  void* again1 = pool.Take(kMiB);
  void* again2 = pool.Take(kMiB);
  EXPECT_EQ(again1, c);
  EXPECT_EQ(again2, b);
  void* huge = pool.Take(3 * kMiB);
  pool.Give(huge, 3 * kMiB);  // larger than the whole capacity: freed at once
  EXPECT_EQ(pool.cached_bytes(), 0u);
  pool.Give(again1, kMiB);
  pool.Give(again2, kMiB);
  pool.SetCapacity(kBlock);
  EXPECT_EQ(pool.cached_bytes(), kBlock);
  pool.Release();  // frees what is cached, keeps the capacity
  EXPECT_EQ(pool.cached_bytes(), 0u);
  void* d = pool.Take(kMiB);
  pool.Give(d, kMiB);
  EXPECT_EQ(pool.cached_bytes(), kBlock);
  pool.SetCapacity(0);  // caches nothing
  EXPECT_EQ(pool.cached_bytes(), 0u);
  pool.Give(pool.Take(kMiB), kMiB);
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

TEST(HostBufferPool, LargeBuffersAreRecycledSmallOnesAreNot) {
  HostBufferPool& pool = HostBufferPool::Process();
  pool.Release();
  const size_t bytes = kRecycledHostBufferBytes + 12345;
  const void* first = nullptr;
  {
    Buffer buffer(bytes);
    EXPECT_EQ(buffer.size(), bytes);
    std::memset(buffer.data(), 7, bytes);
    first = buffer.data();
  }
  EXPECT_EQ(pool.cached_bytes(), HostBufferPool::BlockBytes(bytes));
  {
    Buffer again(bytes);
    EXPECT_EQ(again.data(), first);
    EXPECT_EQ(pool.cached_bytes(), 0u);
  }
  { Buffer small(kRecycledHostBufferBytes - 1); }
  EXPECT_EQ(pool.cached_bytes(), HostBufferPool::BlockBytes(bytes));  // small: not cached
  pool.Release();
}

}  // namespace
}  // namespace lockstep
