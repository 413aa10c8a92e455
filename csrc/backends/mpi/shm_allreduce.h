// Allreduce through a shared-memory window, for jobs whose ranks all share one host.
// Each rank copies its chunk into its own slot; after a barrier, rank r reduces the
// r-th segment of every slot into its own slot; after another barrier, every rank
// copies all reduced segments out: two barriers per chunk however many ranks there
// are. Results are identical on every rank (each segment is reduced once).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "lockstep/types.h"

namespace lockstep {

class ShmAllreduce {
 public:
  // Collective over `comm`. Usable() is false when the ranks span several hosts or the
  // window cannot be created; the caller then stays with MPI.
  ShmAllreduce(MPI_Comm comm, int64_t max_bytes);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  bool Usable() const { return window_ != MPI_WIN_NULL; }
  int64_t max_bytes() const { return max_bytes_; }

  // input may equal output. count * element size must not exceed max_bytes().
  void Run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);
  // The same, except that local rank 0 passes the host's reduced chunk (in `output`)
  // through `across_hosts` first, and the others take the result from its slot: a
  // hierarchical allreduce's first and last steps, with one more barrier.
  void RunThrough(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op,
                  const std::function<void(void*)>& across_hosts);

 private:
  void ReduceOwnSegment(const void* input, int64_t count, DataType dtype, ReduceOp op);
  void CopyOutSegments(void* output, int64_t count, int64_t element) const;
  void Synchronize();
  char* Slot(int rank) const;

  MPI_Comm comm_ = MPI_COMM_NULL;  // this host's ranks (all of the job's)
  MPI_Win window_ = MPI_WIN_NULL;
  int rank_ = 0;
  int size_ = 1;
  int64_t max_bytes_ = 0;
  std::vector<char*> bases_;  // each rank's slot pair, mapped into this process
  int buffer_ = 0;            // which half of each slot pair this run uses
};

}  // namespace lockstep
