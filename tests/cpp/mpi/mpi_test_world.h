// What the C++ MPI tests (ctest MpiUnitTests, real mpirun) ask of MPI_COMM_WORLD.
#pragma once

#include <mpi.h>

namespace lockstep {

inline int WorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace lockstep
