#include "backends/nccl/nccl_communicator.h"

#include <string>

#include "backends/nccl/nccl_types.h"
#include "lockstep/lockstep.h"

namespace lockstep {
namespace {

// What rank 0 broadcasts: the id, or that it could not make one (so the others fail
// too instead of joining a communicator that never forms).
struct IdMessage {
  int32_t result = ncclSuccess;
  ncclUniqueId id;
};

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, int rank, int size, const NcclLibrary& library)
    : library_(library) {
  IdMessage message{};
  if (rank == 0) message.result = library.GetUniqueId(&message.id);
  const int status = MPI_Bcast(&message, sizeof(message), MPI_BYTE, 0, comm);
  if (status != MPI_SUCCESS) {
    throw Error("MPI_Bcast of the NCCL unique id failed (MPI error " + std::to_string(status) +
                ")");
  }
  CheckNccl(static_cast<ncclResult_t>(message.result), "ncclGetUniqueId (on the set's rank 0)", {},
            library);
  CheckNccl(library.CommInitRank(&comm_, size, message.id, rank), "ncclCommInitRank", {}, library);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) (void)library_.CommDestroy(comm_);
}

ncclResult_t NcclCommunicator::AsyncError() const {
  if (comm_ == nullptr) return ncclSuccess;
  ncclResult_t async_error = ncclSuccess;
  const ncclResult_t result = library_.CommGetAsyncError(comm_, &async_error);
  return result != ncclSuccess ? result : async_error;
}

void NcclCommunicator::Abort() {
  if (comm_ == nullptr) return;
  (void)library_.CommAbort(comm_);
  comm_ = nullptr;
}

}  // namespace lockstep
