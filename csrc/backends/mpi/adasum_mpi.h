// Adasum across ranks over MPI, by vector halving and distance doubling (the scheme of
// Horovod's CPU implementation): at level L = 1, 2, 4, ... each rank swaps half of its
// current slice with rank ^ L and combines the half it keeps with the partner's copy
// of it, using dot products and norms summed over the 2L ranks that together hold the
// whole vector; then the slices are gathered back in reverse order. Each tensor of a
// fused buffer gets its own coefficients. Needs a power-of-2 number of ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "lockstep/types.h"

namespace lockstep {

class AdasumMpi {
 public:
  explicit AdasumMpi(MPI_Comm comm);
  AdasumMpi(const AdasumMpi&) = delete;
  AdasumMpi& operator=(const AdasumMpi&) = delete;

  // Replaces `buffer` (tensors of counts[i] elements, back to back) on every rank with
  // the Adasum of all ranks' buffers. Throws Error.
  void Allreduce(void* buffer, const std::vector<int64_t>& counts, DataType dtype);

 private:
  struct Slice {
    int64_t lo = 0;  // first element
    int64_t n = 0;   // element count
  };
  void EnsureLevelComms();
  void Exchange(const void* send, int64_t send_bytes, void* recv, int64_t recv_bytes, int peer);
  void Combine(char* mine, const char* theirs, Slice slice, bool left, int level_index,
               const std::vector<int64_t>& starts, DataType dtype);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  // level_comms_[k] groups the 2^(k+1) ranks that share rank >> (k+1). Created on first
  // use (every rank runs its first Adasum at the same point) and kept until
  // MPI_Finalize: freeing is collective, and a rank shutting down must not wait.
  std::vector<MPI_Comm> level_comms_;
  std::vector<char> received_;
};

}  // namespace lockstep
