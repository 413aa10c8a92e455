// How the engine starts its transport, without seeing MPI: the one MPI entry point the
// engine's default constructor needs, declared apart from mpi_communicator.h so that
// nothing above the backends includes <mpi.h>.
#pragma once

#include "backends/communicator.h"
#include "lockstep/lockstep.h"

namespace lockstep {

// Initializes MPI (or adopts the program's) and returns the job's world over a private
// duplicate of MPI_COMM_WORLD. Throws Error.
World StartMpiWorld();

// GetMpiInfo(): what the build was compiled against and what this process loaded.
MpiInfo QueryMpiInfo();

}  // namespace lockstep
