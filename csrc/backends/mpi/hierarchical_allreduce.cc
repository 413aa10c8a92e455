#include "backends/mpi/hierarchical_allreduce.h"

#include <cstring>
#include <string>

#include "lockstep/values.h"

namespace lockstep {

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm comm, const MpiTypes& types,
                                             int64_t max_bytes, bool cores_shared)
    : types_(types), max_bytes_(max_bytes) {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local_);
  MPI_Comm_rank(local_, &local_rank);
  MPI_Comm_size(local_, &local_size);
  MPI_Comm_split(comm, local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders_);
  if (local_size > 1 && max_bytes_ > 0) {
    shm_ = std::make_unique<ShmAllreduce>(local_, max_bytes_, cores_shared);
  }
  // Every rank must take the same path: a host that cannot share memory, or a job on
  // one host, keeps everybody on the flat path.
  int ok = max_bytes_ > 0 && local_size < size && (local_size == 1 || shm_->Usable());
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  usable_ = all_ok != 0;
}

HierarchicalAllreduce::~HierarchicalAllreduce() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  shm_.reset();
  if (leaders_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_);
  if (local_ != MPI_COMM_NULL) MPI_Comm_free(&local_);
}

void HierarchicalAllreduce::AcrossHosts(void* buffer, int64_t count, DataType dtype, ReduceOp op) {
  const int rc = MPI_Allreduce(MPI_IN_PLACE, buffer, static_cast<int>(count),
                               types_.Datatype(dtype), types_.Op(op, dtype), leaders_);
  if (rc != MPI_SUCCESS) throw Error("hierarchical allreduce: MPI_Allreduce across hosts failed");
}

void HierarchicalAllreduce::Run(const void* input, void* output, int64_t count, DataType dtype,
                                ReduceOp op) {
  const int64_t bytes = count * static_cast<int64_t>(DataTypeSize(dtype));
  if (bytes > max_bytes_) throw Error("hierarchical allreduce: chunk too large");
  if (!shm_) {  // the only rank on its host: it is the leader
    if (input != output) std::memcpy(output, input, bytes);
    AcrossHosts(output, count, dtype, op);
    return;
  }
  shm_->RunThrough(input, output, count, dtype, op,
                   [&](void* reduced) { AcrossHosts(reduced, count, dtype, op); });
}

}  // namespace lockstep
