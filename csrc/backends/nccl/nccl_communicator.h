// One process set's NCCL communicator, built through MPI and never without a deadline:
// rank 0 of the set makes the unique id and broadcasts it (nonblocking MPI, polled),
// every member initializes a nonblocking communicator (blocking = 0) and polls its
// state until LOCKSTEP_NCCL_TIMEOUT_SECONDS, and the members agree on the outcome, so
// that one member failing (no memory, /dev/shm, an NCCL setting) fails them all with
// the cause instead of leaving the others in ncclCommInitRank. Made on the background
// thread with the set's device current.
//
// Every call on a nonblocking communicator may return ncclInProgress: Settle() polls
// until the call's work is queued before the next call, as NCCL requires.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "backends/nccl/nccl_library.h"

namespace lockstep {

class NcclCommunicator {
 public:
  // Collective over `comm`; throws Error on every member when any member fails or the
  // deadline passes (timeout_seconds 0: no deadline).
  NcclCommunicator(MPI_Comm comm, int rank, int size, const NcclLibrary& library,
                   double timeout_seconds);
  // Destroys the communicator unless it was released (Abort, Revoke + Destroy, Leave).
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t get() const { return comm_; }
  // A call on the communicator returned `result`: waits until it is no longer in
  // progress, then throws Error (naming `what` and the tensors) unless it succeeded.
  void Settle(ncclResult_t result, const char* what, const std::vector<std::string>& names) const;
  // ncclSuccess, or the error the communicator hit asynchronously (a peer failed, a
  // network error); polled once per cycle.
  ncclResult_t AsyncError() const;
  bool revoke_available() const { return library_.CommRevoke != nullptr; }
  // ncclCommRevoke (2.29+): stops in-flight work; the caller then drains lockstep's
  // stream and calls DestroyRevoked. Returns false where the library lacks it or it
  // failed.
  bool Revoke();
  // After Revoke: destroys the communicator once NCCL reports it quiescent, as nccl.h
  // requires; one that does not get there in time, or fails, is left (Leave). Returns
  // whether it was destroyed.
  bool DestroyRevoked();
  // Ends the communicator's outstanding work and frees it; idempotent.
  void Abort();
  // Frees it (ncclCommDestroy: an intra-host barrier; every member must call it).
  void Destroy();
  // Gives the communicator up without touching it: its kernels may still spin on the
  // GPU, and freeing its memory under them would fault (NCCL 2.28 after a timeout).
  void Leave() { comm_ = nullptr; }
  bool released() const { return comm_ == nullptr; }

 private:
  // Polls the communicator's state until it leaves ncclInProgress or `seconds` pass.
  ncclResult_t WaitWhileInProgress(double seconds) const;

  const NcclLibrary& library_;
  double timeout_seconds_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace lockstep
