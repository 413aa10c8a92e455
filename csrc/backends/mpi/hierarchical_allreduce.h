// Allreduce for ranks on several hosts in three steps: the ranks of each host reduce
// through shared memory, one leader per host (local rank 0) allreduces the host's sum
// with the other leaders over MPI, and the host's ranks copy the result back out of
// the leader's shared slot. Only the leaders' traffic crosses the network.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "backends/mpi/mpi_types.h"
#include "backends/mpi/shm_allreduce.h"

namespace lockstep {

class HierarchicalAllreduce {
 public:
  // Collective over `comm`. Usable() is the same on every rank: false when all ranks
  // share one host (nothing to gain) or some host cannot make its window.
  HierarchicalAllreduce(MPI_Comm comm, const MpiTypes& types, int64_t max_bytes, bool cores_shared);
  ~HierarchicalAllreduce();
  HierarchicalAllreduce(const HierarchicalAllreduce&) = delete;
  HierarchicalAllreduce& operator=(const HierarchicalAllreduce&) = delete;

  bool Usable() const { return usable_; }
  int64_t max_bytes() const { return max_bytes_; }

  // input may equal output; count * element size must not exceed max_bytes().
  void Run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);

 private:
  void AcrossHosts(void* buffer, int64_t count, DataType dtype, ReduceOp op);

  const MpiTypes& types_;
  int64_t max_bytes_;
  MPI_Comm local_ = MPI_COMM_NULL;
  MPI_Comm leaders_ = MPI_COMM_NULL;   // local rank 0 of every host; null elsewhere
  std::unique_ptr<ShmAllreduce> shm_;  // null on a host with one rank
  bool usable_ = false;
};

}  // namespace lockstep
