// The transports of host memory (MPI, shared memory): the interface HostCollectives
// calls (GPU memory has collectives of its own, see backends/collectives.h). Buffers
// are already packed and scaled by the host collectives: a backend only moves and
// reduces bytes.
// Failures throw lockstep::Error.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/types.h"

namespace lockstep {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // input == output reduces in place. Average arrives here as Sum; the op runner
  // divides.
  virtual void Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                         ReduceOp op) = 0;
  // bytes_per_rank[r] bytes from rank r land at the running offset in output.
  virtual void Allgatherv(const void* input, void* output,
                          const std::vector<int64_t>& bytes_per_rank) = 0;
  virtual void Broadcast(void* buffer, int64_t bytes, int root_rank) = 0;
  virtual void Alltoallv(const void* input, const std::vector<int64_t>& send_bytes, void* output,
                         const std::vector<int64_t>& recv_bytes) = 0;
  // counts[r] elements of the reduction go to rank r.
  virtual void ReduceScatter(const void* input, void* output, const std::vector<int64_t>& counts,
                             DataType dtype, ReduceOp op) = 0;
  virtual void Barrier() = 0;
  // Replaces `buffer` (tensors of counts[i] elements, back to back) with the Adasum of
  // every rank's buffer, each tensor combined with its own coefficients.
  virtual void Adasum(void* buffer, const std::vector<int64_t>& counts, DataType dtype) = 0;

  // Optional fast paths of a transport (MPI: shared memory within a host), which the
  // engine reports and the autotuner switches.
  virtual bool shm_available() const { return false; }
  virtual bool shm_active() const { return false; }
  virtual void set_shm_enabled(bool enabled) {}
  virtual bool hierarchical_active() const { return false; }
};

}  // namespace lockstep
