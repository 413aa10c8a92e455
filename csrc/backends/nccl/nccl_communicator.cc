#include "backends/nccl/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "backends/gpu_agreement.h"
#include "backends/nccl/nccl_types.h"
#include "common/tensor_list.h"
#include "lockstep/values.h"

namespace lockstep {
namespace {

// What rank 0 broadcasts: the id, or that it could not make one (so the others fail
// too instead of joining a communicator that never forms).
struct IdMessage {
  int32_t result = ncclSuccess;
  ncclUniqueId id;
};

// The members that failed early wait this much longer than the setup's deadline for
// the slow ones (which fail at the deadline) to join the agreement.
constexpr double kAgreementGraceSeconds = 30.0;

std::string Seconds(double seconds) {
  std::string text = std::to_string(seconds);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, int rank, int size, const NcclLibrary& library,
                                   double timeout_seconds)
    : library_(library), timeout_seconds_(timeout_seconds) {
  const auto deadline = DeadlineIn(timeout_seconds);
  // On the heap: after a timeout MPI may still write it (the request cannot be cancelled).
  auto* message = new IdMessage{};
  if (rank == 0) message->result = library.GetUniqueId(&message->id);
  const std::string broadcast = BroadcastBefore(message, sizeof(IdMessage), 0, comm, deadline,
                                                "broadcast of the NCCL unique id");
  if (!broadcast.empty()) throw Error("NCCL communicator setup failed: " + broadcast);
  const IdMessage id = *message;
  delete message;
  CheckNccl(static_cast<ncclResult_t>(id.result), "ncclGetUniqueId (on the set's rank 0)", {},
            library);

  std::string local_failure;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; the state is polled below against the deadline
  ncclResult_t result = library.CommInitRankConfig(&comm_, size, id.id, rank, &config);
  if (result == ncclSuccess || result == ncclInProgress) {
    result = comm_ != nullptr ? WaitWhileInProgress(timeout_seconds) : ncclInternalError;
  }
  if (result == ncclInProgress) {
    local_failure = "NCCL communicator setup (ncclCommInitRankConfig) did not finish within " +
                    Seconds(timeout_seconds) +
                    " s (LOCKSTEP_NCCL_TIMEOUT_SECONDS): another rank of the process set failed "
                    "or hangs in its setup";
  } else if (result != ncclSuccess) {
    local_failure = DescribeNcclFailure(result, "ncclCommInitRankConfig", {}, library);
  }
  if (!local_failure.empty()) Abort();
  const Agreement agreed = AgreeAllOk(
      comm, local_failure.empty(),
      timeout_seconds > 0 ? DeadlineIn(timeout_seconds + kAgreementGraceSeconds) : DeadlineIn(0),
      "agreeing on the NCCL communicator's setup");
  if (agreed.reached && agreed.all_ok) return;
  Abort();  // this member's part may have formed; the set's does not exist
  std::string why = !local_failure.empty() ? local_failure
                    : agreed.reached       ? "another rank of the process set failed to set up "
                                             "its NCCL communicator (see that rank's error)"
                                           : agreed.problem;
  throw Error("NCCL communicator setup failed on this process set: " + why);
}

NcclCommunicator::~NcclCommunicator() { Destroy(); }

ncclResult_t NcclCommunicator::WaitWhileInProgress(double seconds) const {
  const auto deadline = DeadlineIn(seconds);
  auto pause = std::chrono::microseconds(10);
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = library_.CommGetAsyncError(comm_, &state);
    if (result != ncclSuccess) return result;
    if (state != ncclInProgress) return state;
    if (AgreementClock::now() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

void NcclCommunicator::Settle(ncclResult_t result, const char* what,
                              const std::vector<std::string>& names) const {
  if (result == ncclInProgress && comm_ != nullptr) result = WaitWhileInProgress(timeout_seconds_);
  if (result == ncclInProgress) {
    throw Error(std::string("NCCL ") + what + " for tensor(s) " + TensorList(names) +
                " was still being queued after " + Seconds(timeout_seconds_) +
                " s (LOCKSTEP_NCCL_TIMEOUT_SECONDS)");
  }
  CheckNccl(result, what, names, library_);
}

ncclResult_t NcclCommunicator::AsyncError() const {
  if (comm_ == nullptr) return ncclSuccess;
  ncclResult_t async_error = ncclSuccess;
  const ncclResult_t result = library_.CommGetAsyncError(comm_, &async_error);
  return result != ncclSuccess ? result : async_error;
}

bool NcclCommunicator::Revoke() {
  if (comm_ == nullptr || library_.CommRevoke == nullptr) return false;
  const ncclResult_t result = library_.CommRevoke(comm_, 0);
  return result == ncclSuccess || result == ncclInProgress;
}

bool NcclCommunicator::DestroyRevoked() {
  if (comm_ == nullptr) return false;
  if (WaitWhileInProgress(timeout_seconds_) != ncclSuccess) {
    Leave();
    return false;
  }
  (void)library_.CommDestroy(comm_);
  comm_ = nullptr;
  return true;
}

void NcclCommunicator::Abort() {
  if (comm_ == nullptr) return;
  // Its result is not actionable: the communicator is gone either way.
  (void)library_.CommAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::Destroy() {
  if (comm_ == nullptr) return;
  // After a revoke, destroy only once the communicator is quiescent.
  (void)WaitWhileInProgress(timeout_seconds_);
  (void)library_.CommDestroy(comm_);
  comm_ = nullptr;
}

}  // namespace lockstep
