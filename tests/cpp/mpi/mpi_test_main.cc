// main() of the C++ tests that run under real mpirun (ctest MpiUnitTests, 3 ranks):
// MPI with MPI_THREAD_MULTIPLE, as lockstep asks for it; only rank 0 prints gtest's
// report, and any rank's failure fails the run.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
