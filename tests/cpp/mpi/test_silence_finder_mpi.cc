// The collective watchdog's SilenceFinder over MPI (backends/mpi/mpi_silence_finder)
// under real mpirun, 3 ranks: rank 0 names the rank that never answers and the others
// hear the same verdict; when every rank answers, nobody is named; a rank whose
// verdict never comes blames rank 0 once its wait is over.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "backends/mpi/mpi_silence_finder.h"
#include "mpi_test_world.h"

namespace lockstep {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(SilenceFinderMpiTest, EveryRankAnsweringNamesNobody) {
  MpiSilenceFinder finder(std::make_shared<PeerProbe>(MPI_COMM_WORLD));
  const bool root = WorldRank() == 0;
  const std::vector<int> silent = finder.FindSilentRanks(root ? 5.0 : 30.0);
  if (root) finder.ShareVerdict(silent);
  EXPECT_TRUE(silent.empty()) << "rank " << WorldRank() << " got " << silent.size() << " ranks";
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SilenceFinderMpiTest, RankZeroNamesTheRankThatNeverAnswersAndTheOthersHearIt) {
  MpiSilenceFinder finder(std::make_shared<PeerProbe>(MPI_COMM_WORLD));
  const int rank = WorldRank();
  const auto start = std::chrono::steady_clock::now();
  if (rank == 2) {
    // Silent until rank 0 has judged, as a rank stuck in a collective would be.
    std::this_thread::sleep_for(std::chrono::seconds(3));
  } else {
    const std::vector<int> silent = finder.FindSilentRanks(rank == 0 ? 1.0 : 30.0);
    if (rank == 0) {
      finder.ShareVerdict(silent);
      EXPECT_LT(SecondsSince(start), 2.5) << "rank 0 waited past its 1 s";
    }
    EXPECT_EQ(silent, std::vector<int>{2}) << "on rank " << rank;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(SilenceFinderMpiTest, AVerdictThatNeverComesBlamesRankZero) {
  MpiSilenceFinder finder(std::make_shared<PeerProbe>(MPI_COMM_WORLD));
  const int rank = WorldRank();
  if (rank != 0) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(finder.FindSilentRanks(1.0), std::vector<int>{0}) << "on rank " << rank;
    EXPECT_LT(SecondsSince(start), 2.5);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace lockstep
