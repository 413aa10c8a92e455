// SharedSegment (backends/mpi/shared_segment) under real mpirun, 3 ranks on one host:
// every rank sees what the others write to their parts, nothing is left in /dev/shm
// once it is mapped, unmapping is local, and a segment /dev/shm cannot hold is refused
// on every rank at construction.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "backends/mpi/shared_segment.h"
#include "mpi_test_world.h"

namespace lockstep {
namespace {

// Segments that local rank 0 (world rank 0 here) created and left in /dev/shm, once
// every rank is past the constructor (rank 0 unlinks the name on its way out of it).
int LeftInDevShm(int creator_pid) {
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string prefix = "lockstep-" + std::to_string(creator_pid) + "-";
  int left = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) ++left;
  }
  return left;
}

int RankZeroPid() {
  int pid = getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return pid;
}

TEST(SharedSegmentMpiTest, EveryRankSeesTheOthersPartsAndNothingIsLeftInDevShm) {
  const int rank = WorldRank(), size = WorldSize();
  const int creator = RankZeroPid();
  constexpr int64_t kPart = 10000;  // not a page multiple: parts are rounded up
  SharedSegment segment(MPI_COMM_WORLD, kPart);
  ASSERT_TRUE(segment.Mapped()) << segment.failure();
  EXPECT_EQ(LeftInDevShm(creator), 0) << "the name outlived the mapping";
  const int64_t page = sysconf(_SC_PAGESIZE);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(segment.Part(r)) % page, 0U) << "part " << r;
  }
  std::memset(segment.Part(rank), 'a' + rank, kPart);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(segment.Part(r)[0], 'a' + r) << "rank " << rank << " reading part " << r;
    EXPECT_EQ(segment.Part(r)[kPart - 1], 'a' + r) << "rank " << rank << " reading part " << r;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SharedSegmentMpiTest, UnmappingIsLocal) {
  // Rank 1 unmaps while the others still write and read: no rank waits for another.
  const int rank = WorldRank(), size = WorldSize();
  auto segment = std::make_unique<SharedSegment>(MPI_COMM_WORLD, 4096);
  ASSERT_TRUE(segment->Mapped()) << segment->failure();
  if (rank == 1) segment.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 1) {
    const int other = rank == 0 ? size - 1 : 0;
    segment->Part(rank)[0] = static_cast<char>(rank + 1);
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(segment->Part(other)[0], static_cast<char>(other + 1));
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST(SharedSegmentMpiTest, ASegmentDevShmCannotHoldIsRefusedOnEveryRank) {
  const int creator = RankZeroPid();
  SharedSegment segment(MPI_COMM_WORLD, int64_t{1} << 44);  // 16 TiB per rank
  EXPECT_FALSE(segment.Mapped());
  EXPECT_FALSE(segment.failure().empty());
  EXPECT_EQ(LeftInDevShm(creator), 0);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace lockstep
