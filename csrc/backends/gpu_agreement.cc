#include "backends/gpu_agreement.h"

#include <algorithm>
#include <thread>

namespace lockstep {
namespace {

// Polls a nonblocking MPI request until it completes or the deadline passes.
std::string WaitBefore(MPI_Request* request, AgreementClock::time_point deadline,
                       const std::string& what) {
  // Short sleeps: the set's ranks arrive within microseconds of each other normally,
  // and this runs once per set (setup, shutdown), never per op.
  auto pause = std::chrono::microseconds(20);
  while (true) {
    int done = 0;
    const int status = MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (status != MPI_SUCCESS)
      return what + ": MPI_Test failed (MPI error " + std::to_string(status) + ")";
    if (done) return "";
    if (AgreementClock::now() > deadline) {
      return what +
             ": not every rank of the process set took part before the deadline "
             "(a rank died, hangs, or failed before reaching it)";
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

}  // namespace

AgreementClock::time_point DeadlineIn(double seconds) {
  if (seconds <= 0) return AgreementClock::time_point::max();
  return AgreementClock::now() + std::chrono::duration_cast<AgreementClock::duration>(
                                     std::chrono::duration<double>(seconds));
}

Agreement AgreeAllOk(MPI_Comm comm, bool local_ok, AgreementClock::time_point deadline,
                     const std::string& what) {
  Agreement agreement;
  // On the heap: a request abandoned at the deadline may still write it later.
  auto* value = new int(local_ok ? 1 : 0);
  MPI_Request request = MPI_REQUEST_NULL;
  const int status = MPI_Iallreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MIN, comm, &request);
  if (status != MPI_SUCCESS) {
    delete value;
    agreement.problem = what + ": MPI_Iallreduce failed (MPI error " + std::to_string(status) + ")";
    return agreement;
  }
  agreement.problem = WaitBefore(&request, deadline, what);
  if (!agreement.problem.empty()) return agreement;  // `value` leaks with the request
  agreement.reached = true;
  agreement.all_ok = *value == 1;
  delete value;
  return agreement;
}

std::string BroadcastBefore(void* data, int bytes, int root, MPI_Comm comm,
                            AgreementClock::time_point deadline, const std::string& what) {
  MPI_Request request = MPI_REQUEST_NULL;
  const int status = MPI_Ibcast(data, bytes, MPI_BYTE, root, comm, &request);
  if (status != MPI_SUCCESS) {
    return what + ": MPI_Ibcast failed (MPI error " + std::to_string(status) + ")";
  }
  return WaitBefore(&request, deadline, what);
}

FailureAction OnCommunicatorFailure(bool revoke_available, bool work_queued_behind) {
  if (revoke_available) return FailureAction::kRevokeDrainDestroy;
  return work_queued_behind ? FailureAction::kLeave : FailureAction::kAbort;
}

ShutdownAction OnShutdown(const Agreement& all_drained, bool revoke_available,
                          bool locally_drained) {
  if (all_drained.reached && all_drained.all_ok) return ShutdownAction::kDestroy;
  if (revoke_available) return ShutdownAction::kRevokeDrainDestroy;
  // Some member still has GPU work queued, or the members could not agree: no member
  // may destroy (it would wait at the intra-host barrier for one that aborts). Abort
  // only where nothing of lockstep's is left on this rank's stream to fault.
  return locally_drained ? ShutdownAction::kAbort : ShutdownAction::kLeave;
}

const char* ActionName(FailureAction action) {
  switch (action) {
    case FailureAction::kRevokeDrainDestroy:
      return "revoked, drained and destroyed";
    case FailureAction::kAbort:
      return "aborted";
    case FailureAction::kLeave:
      return "left as is (NCCL 2.28 cannot abort it safely while lockstep's stream has work "
             "queued behind it)";
  }
  return "?";
}

const char* ActionName(ShutdownAction action) {
  switch (action) {
    case ShutdownAction::kDestroy:
      return "destroyed";
    case ShutdownAction::kRevokeDrainDestroy:
      return "revoked, drained and destroyed";
    case ShutdownAction::kAbort:
      return "aborted";
    case ShutdownAction::kLeave:
      return "left as is";
  }
  return "?";
}

}  // namespace lockstep
