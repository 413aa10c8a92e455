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

// "ranks 3, 4 on node2 were lost (MPI reports the process failed)" for a process-
// failure error whose ranks are known, a sentence naming none where a peer's revocation
// is all this rank knows, "" for any other error. hostnames[r]: rank r of comm's host.
std::string DescribeLostProcesses(int mpi_error, MPI_Comm comm,
                                  const std::vector<std::string>& hostnames);

// MPI's words for an error code and its class; "error code N" for a code MPI does not
// know (asking MPI about one would end the job).
std::string ErrorText(int mpi_error);

// Without waiting: as DescribeLostProcesses for a failure of a process of `comm` that
// MPI knows of, or a revocation of `comm` by a peer; "" while there is none. For waits
// that no MPI call watches (shared memory): it drives MPI's progress, so that MPI can
// learn of them, with a probe that takes no message.
std::string DescribeKnownFailure(MPI_Comm comm, const std::vector<std::string>& hostnames);

// Rank r of `comm`'s host, from every rank of `world_comm`'s host (`comm` is part of it).
std::vector<std::string> HostnamesOf(MPI_Comm comm, MPI_Comm world_comm,
                                     const std::vector<std::string>& world_hostnames);

// Whether a lost process leaves the others running: an MPI with ULFM, in a job started
// with it on (`mpirun --with-ft ulfm`). Otherwise the MPI ends the job itself.
bool SurvivesProcessFailures();

// ULFM's shrink: collective over the processes of `comm` that are alive; `survivors`
// gets a communicator of those, in the order of `comm`. Returns the MPI error code
// (MPI_ERR_UNSUPPORTED_OPERATION without ULFM).
int ShrinkToSurvivors(MPI_Comm comm, MPI_Comm* survivors);

// ULFM's agreement over `comm`: kAllAlive on every survivor if no process of `comm`
// has failed, kProcessFailed on every survivor if one has, even when one fails during
// the call. A plain success of another collective proves nothing under ULFM: one that
// overlaps a failure can return success with a wrong result on some ranks. kTimedOut
// after `timeout_seconds` (0: none) when some process, alive but frozen or cut off,
// has not taken part; `comm` must not be used again then. A success whose result is
// not the ranks' contribution (Open MPI 5.0.11, on every rank alike) is agreed again.
enum class Agreement { kAllAlive, kProcessFailed, kTimedOut };
Agreement AgreeEveryProcessAlive(MPI_Comm comm, double timeout_seconds);

}  // namespace lockstep
