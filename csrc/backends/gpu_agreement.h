// Decisions the members of a process set take together about their GPU collectives,
// over the set's MPI communicator and never without a deadline: a member that died or
// hangs must not keep the others in a blocking MPI call. Device-free, so it is tested
// under mpirun on CPU.
//
// On a timeout the nonblocking MPI request is left outstanding (MPI cannot cancel a
// collective): the caller treats it as fatal for the set's GPU path.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>

namespace lockstep {

using AgreementClock = std::chrono::steady_clock;

// A deadline `seconds` from now; seconds <= 0 means none (the farthest time point).
AgreementClock::time_point DeadlineIn(double seconds);

struct Agreement {
  bool all_ok = false;   // every member contributed ok (meaningful only if reached)
  bool reached = false;  // false: the deadline passed or MPI failed; see problem
  std::string problem;   // why no agreement was reached
};

// Collective over `comm`: all_ok is true iff every member's local_ok is. `what` names
// the decision in messages.
Agreement AgreeAllOk(MPI_Comm comm, bool local_ok, AgreementClock::time_point deadline,
                     const std::string& what);

// Collective over `comm`: `root`'s `bytes` bytes at `data` reach every member. Returns
// "" or why not (deadline passed, MPI failed); after a timeout MPI may still write
// `data` later, so it must outlive the process's MPI use (heap memory that leaks).
std::string BroadcastBefore(void* data, int bytes, int root, MPI_Comm comm,
                            AgreementClock::time_point deadline, const std::string& what);

// What a failed or timed-out communicator leaves to do, by what the loaded NCCL
// offers. NCCL 2.28's ncclCommAbort frees the communicator's device memory without
// waiting for work queued behind the hung collective on lockstep's stream, whose
// kernels would then fault and poison the CUDA context the framework shares; with
// ncclCommRevoke (2.29+) the stream drains first.
enum class FailureAction {
  kRevokeDrainDestroy,  // revoke, wait for lockstep's stream, destroy
  kAbort,               // nothing of lockstep's is queued behind it: abort is safe
  kLeave,               // leave the communicator (its kernels may spin) and restart
};
FailureAction OnCommunicatorFailure(bool revoke_available, bool work_queued_behind);

// At shutdown (or removal of the set), after each member drained its queued GPU work
// for a while and the members agreed (or failed to agree) on whether all drained.
// ncclCommDestroy includes an intra-host barrier, so either every member destroys or
// none does.
enum class ShutdownAction { kDestroy, kRevokeDrainDestroy, kAbort, kLeave };
ShutdownAction OnShutdown(const Agreement& all_drained, bool revoke_available,
                          bool locally_drained);

const char* ActionName(FailureAction action);
const char* ActionName(ShutdownAction action);

}  // namespace lockstep
