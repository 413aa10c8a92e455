// Does the launcher that started this process belong to the MPI lockstep was built
// against? An MPI library started by another MPI's launcher either hangs in MPI_Init
// or runs every rank as a job of its own, which would train N unsynchronized copies.
// These checks turn both into one clear error on every rank. Pure functions of the
// environment and of GetMpiInfo(), so they are unit-tested without launching.
#pragma once

#include <functional>
#include <string>

#include "lockstep/values.h"

namespace lockstep {

// Reads one environment variable; nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Before MPI_Init: the error message when the environment shows another MPI's
// launcher (Open MPI 4's ORTE, Open MPI 5's PRRTE, MPICH's Hydra) than the one the
// build's MPI needs, or when the loaded libmpi is not the one built against; empty
// when they match or nothing can be told.
std::string LauncherMismatch(const EnvLookup& env, const MpiInfo& info);

// After MPI_Init: the error message when the launcher's environment says this
// process is one of N ranks (OMPI_COMM_WORLD_SIZE, PMI_SIZE; HOROVOD_SIZE for a
// process started with plain python) but MPI gave it a world of `world_size`.
std::string WorldSizeMismatch(const EnvLookup& env, int world_size, const MpiInfo& info);

}  // namespace lockstep
