// The MPI backend: collectives on host memory over lockstep's private communicator.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/call_clock.h"
#include "backends/mpi/adasum_mpi.h"
#include "backends/mpi/hierarchical_allreduce.h"
#include "backends/mpi/mpi_types.h"
#include "backends/mpi/shm_allreduce.h"

namespace lockstep {

class MpiBackend : public Backend {
 public:
  // When every rank shares this host and there are at least shm_min_ranks of them (0:
  // never), allreduce pieces up to shm_bytes (at most kShmMaxBytes) go through shared
  // memory. With `hierarchical` and ranks on several hosts, allreduce
  // pieces up to shm_bytes reduce within each host through shared memory and across
  // hosts among one leader per host. `cores_shared`: this host runs more ranks than it
  // has cores (shared-memory waits then yield). Every blocking call is marked on
  // `clock` (shared by the backends of all process sets: one collective runs at a time).
  // hostnames[r]: rank r of `comm`'s host, to name the ranks a failed call lost.
  MpiBackend(MPI_Comm comm, const MpiTypes& types, int64_t shm_bytes, int shm_min_ranks,
             bool hierarchical, bool cores_shared, CallClock& clock,
             std::vector<std::string> hostnames);
  // The window holds two slots of this many bytes per rank at most, whatever the chunk
  // size; larger pieces (LOCKSTEP_CHUNK_BYTES raised past it, or 0) stay with MPI.
  static constexpr int64_t kShmMaxBytes = 8 * 1024 * 1024;
  bool shm_available() const override { return shm_ != nullptr; }
  bool shm_active() const override { return shm_ != nullptr && shm_enabled_; }
  // The autotuner's switch; a no-op where shared memory is not available.
  void set_shm_enabled(bool enabled) override { shm_enabled_ = enabled; }
  bool hierarchical_active() const override { return hierarchical_ != nullptr; }
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
  void Adasum(void* buffer, const std::vector<int64_t>& counts, DataType dtype) override;

 private:
  // Throws on an MPI error: PeerTimeout naming the lost ranks where ULFM knows them.
  void Check(int rc, const char* what) const;

  MPI_Comm comm_;
  const MpiTypes& types_;
  CallClock& call_clock_;
  std::vector<std::string> hostnames_;
  int size_ = 1;
  bool every_rank_ = true;             // this set has all the job's ranks (see CallClock)
  std::unique_ptr<ShmAllreduce> shm_;  // null unless usable
  bool shm_enabled_ = true;
  std::unique_ptr<HierarchicalAllreduce> hierarchical_;  // null unless asked for and usable
  AdasumMpi adasum_;
};

}  // namespace lockstep
