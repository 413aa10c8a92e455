// The MPI backend: collectives on host memory over lockstep's private communicator.
#pragma once

#include <mpi.h>

#include "backend.h"
#include "mpi_types.h"

namespace lockstep {

class MpiBackend : public Backend {
 public:
  MpiBackend(MPI_Comm comm, const MpiTypes& types);
  const char* name() const override { return "MPI"; }

  void Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                 ReduceOp op) override;
  void Allgatherv(const void* input, void* output,
                  const std::vector<int64_t>& bytes_per_rank) override;
  void Broadcast(void* buffer, int64_t bytes, int root_rank) override;
  void Alltoallv(const void* input, const std::vector<int64_t>& send_bytes, void* output,
                 const std::vector<int64_t>& recv_bytes) override;
  void ReduceScatter(const void* input, void* output, const std::vector<int64_t>& counts,
                     DataType dtype, ReduceOp op) override;
  void Barrier() override;

 private:
  MPI_Comm comm_;
  const MpiTypes& types_;
  int size_ = 1;
};

}  // namespace lockstep
