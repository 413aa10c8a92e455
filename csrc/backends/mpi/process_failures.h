// Which processes an MPI error lost, where the MPI can tell. Under ULFM (Open MPI 5
// started with `mpirun --with-ft ulfm`, as lockstep-run does for elastic jobs) a call
// that loses a peer returns MPI_ERR_PROC_FAILED or MPI_ERR_REVOKED instead of ending
// the job, and the library knows the failed ranks; without ULFM it names nobody.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace lockstep {

// For one of ULFM's process-failure errors: revokes `comm` (so every survivor's pending
// and next calls on it fail at once, not only those that talked to the dead process)
// and returns the ranks of `comm` known to have failed, ascending, waiting up to
// `wait_seconds` for the failure detector to name them. Empty for any other error.
std::vector<int> LostProcesses(int mpi_error, MPI_Comm comm, double wait_seconds = 1.0);

// "ranks 3, 4 on node2 were lost (MPI reports the processes failed)" for a process-
// failure error whose ranks are known; "" otherwise. hostnames[r]: rank r of comm's host.
std::string DescribeLostProcesses(int mpi_error, MPI_Comm comm,
                                  const std::vector<std::string>& hostnames);

// Rank r of `comm`'s host, from every world rank's host.
std::vector<std::string> HostnamesOf(MPI_Comm comm,
                                     const std::vector<std::string>& world_hostnames);

}  // namespace lockstep
