// How the engine starts its transport, without seeing MPI: the one MPI entry point the
// engine's default constructor needs, declared apart from mpi_communicator.h so that
// nothing above the backends includes <mpi.h>.
#pragma once

#include "backends/communicator.h"
#include "lockstep/values.h"

namespace lockstep {

// Initializes MPI (or adopts the program's) and returns the job's world over a private
// duplicate of MPI_COMM_WORLD (of its survivors after ShrinkMpiWorld). Throws Error.
World StartMpiWorld();

// Whether the job survives the loss of a process (ULFM on; see process_failures.h).
bool MpiWorldCanShrink();

// Collective over the surviving processes of the world, while no engine runs: the next
// StartMpiWorld() starts over the survivors only (ranks renumbered in their order).
// Throws Error where the MPI cannot (no ULFM, or a job started without it).
void ShrinkMpiWorld();

// GetMpiInfo(): what the build was compiled against and what this process loaded.
MpiInfo QueryMpiInfo();

}  // namespace lockstep
