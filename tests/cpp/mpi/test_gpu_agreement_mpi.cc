// The GPU path's decisions across ranks (backends/gpu_agreement) under real mpirun, on
// CPU: every rank reaches the same outcome, a rank that fails fails them all, and a
// rank that never arrives makes the others give up at the deadline instead of hanging.
// Run with 3 ranks (ctest does: MpiUnitTests).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <string>

#include "backends/gpu_agreement.h"
#include "mpi_test_world.h"

namespace lockstep {
namespace {

// A communicator of its own per test: a request abandoned at a deadline stays on it.
MPI_Comm FreshComm() {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return comm;
}

double SecondsSince(AgreementClock::time_point start) {
  return std::chrono::duration<double>(AgreementClock::now() - start).count();
}

TEST(GpuAgreementMpiTest, AllOkWhenEveryRankIs) {
  MPI_Comm comm = FreshComm();
  const Agreement agreed = AgreeAllOk(comm, true, DeadlineIn(30), "test");
  EXPECT_TRUE(agreed.reached) << agreed.problem;
  EXPECT_TRUE(agreed.all_ok);
  MPI_Comm_free(&comm);
}

TEST(GpuAgreementMpiTest, OneFailingRankFailsEveryRank) {
  MPI_Comm comm = FreshComm();
  const Agreement agreed = AgreeAllOk(comm, WorldRank() != 1, DeadlineIn(30), "test");
  EXPECT_TRUE(agreed.reached) << agreed.problem;
  EXPECT_FALSE(agreed.all_ok) << "rank " << WorldRank() << " did not learn of rank 1's failure";
  MPI_Comm_free(&comm);
}

TEST(GpuAgreementMpiTest, ARankThatNeverArrivesMakesTheOthersGiveUpAtTheDeadline) {
  MPI_Comm comm = FreshComm();
  const int absent = 2;
  if (WorldRank() != absent) {
    const auto start = AgreementClock::now();
    const Agreement agreed = AgreeAllOk(comm, true, DeadlineIn(0.5), "agreeing on the test");
    const double waited = SecondsSince(start);
    EXPECT_FALSE(agreed.reached);
    EXPECT_NE(agreed.problem.find("agreeing on the test"), std::string::npos) << agreed.problem;
    EXPECT_NE(agreed.problem.find("deadline"), std::string::npos) << agreed.problem;
    EXPECT_GE(waited, 0.45);
    EXPECT_LT(waited, 5.0) << "did not give up at the deadline";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The late rank completes the collective, so nothing stays pending at MPI_Finalize.
  if (WorldRank() == absent) (void)AgreeAllOk(comm, true, DeadlineIn(30), "late");
}

TEST(GpuAgreementMpiTest, BroadcastDeliversTheRootsBytes) {
  MPI_Comm comm = FreshComm();
  char text[16] = {};
  if (WorldRank() == 0) std::strcpy(text, "nccl-unique-id");
  EXPECT_EQ(BroadcastBefore(text, sizeof(text), 0, comm, DeadlineIn(30), "test"), "");
  EXPECT_STREQ(text, "nccl-unique-id");
  MPI_Comm_free(&comm);
}

TEST(GpuAgreementMpiTest, ABroadcastWhoseRootNeverSendsTimesOut) {
  MPI_Comm comm = FreshComm();
  static char late[8] = {};  // static: the abandoned receive may still write it
  if (WorldRank() != 0) {
    const auto start = AgreementClock::now();
    const std::string problem =
        BroadcastBefore(late, sizeof(late), 0, comm, DeadlineIn(0.5), "broadcast of the id");
    EXPECT_NE(problem.find("broadcast of the id"), std::string::npos) << problem;
    EXPECT_LT(SecondsSince(start), 5.0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (WorldRank() == 0) (void)BroadcastBefore(late, sizeof(late), 0, comm, DeadlineIn(30), "late");
}

}  // namespace
}  // namespace lockstep
