// One process set's NCCL communicator, built through MPI: rank 0 of the set makes the
// unique id and broadcasts it over the set's MPI communicator, then every member
// joins. Made on the background thread with the set's device current.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include "backends/nccl/nccl_library.h"

namespace lockstep {

class NcclCommunicator {
 public:
  // Collective over `comm` (every member calls it in the same cycle). Throws Error on
  // every member when rank 0 cannot make the id, else on the members whose NCCL
  // initialization fails.
  NcclCommunicator(MPI_Comm comm, int rank, int size, const NcclLibrary& library);
  // Destroys the communicator; call Abort first where its work may never finish.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t get() const { return comm_; }
  // ncclSuccess, or the error the communicator hit asynchronously (a peer failed, a
  // network error); polled once per cycle.
  ncclResult_t AsyncError() const;
  // Ends the communicator's outstanding work (its kernels return) and frees it;
  // idempotent. Later calls on it are not allowed.
  void Abort();
  bool aborted() const { return comm_ == nullptr; }

 private:
  const NcclLibrary& library_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace lockstep
