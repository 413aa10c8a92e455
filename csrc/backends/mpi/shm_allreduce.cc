#include "backends/mpi/shm_allreduce.h"

#include <cstring>
#include <string>

#include "lockstep/lockstep.h"
#include "reduction/reduce_kernels.h"

namespace lockstep {
namespace {

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("shared-memory allreduce: ") + what + " failed");
}

}  // namespace

ShmAllreduce::ShmAllreduce(MPI_Comm comm, int64_t max_bytes) : max_bytes_(max_bytes) {
  int world = 0;
  MPI_Comm_size(comm, &world);
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // Every rank computes the same answer, so all of them go on (or not) together.
  if (size_ != world || size_ < 2 || max_bytes_ <= 0) return;

  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");  // each slot pair on its rank's pages
  char* base = nullptr;
  // Two slots per rank: consecutive runs alternate, so a rank may start filling the
  // next run's slot while slower ranks still copy out of this one.
  const int rc = MPI_Win_allocate_shared(2 * max_bytes_, 1, info, comm_, &base, &window_);
  MPI_Info_free(&info);
  int ok = rc == MPI_SUCCESS, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm_);
  if (!all_ok) {
    if (rc == MPI_SUCCESS) MPI_Win_free(&window_);
    window_ = MPI_WIN_NULL;
    return;
  }
  bases_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    MPI_Aint bytes = 0;
    int unit = 0;
    void* peer = nullptr;
    Check(MPI_Win_shared_query(window_, r, &bytes, &unit, &peer), "MPI_Win_shared_query");
    bases_[r] = static_cast<char*>(peer);
  }
  MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN);
  // A passive epoch for the window's lifetime: loads and stores go straight to shared
  // memory, ordered by MPI_Win_sync plus a barrier (the MPI-3 shared-memory pattern).
  Check(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_), "MPI_Win_lock_all");
}

ShmAllreduce::~ShmAllreduce() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // The window itself stays until MPI_Finalize: freeing it is collective, and a rank
  // that shuts down must never wait for ranks that have not. It is 2 chunks per rank.
  if (window_ != MPI_WIN_NULL) MPI_Win_unlock_all(window_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

char* ShmAllreduce::Slot(int rank) const { return bases_[rank] + buffer_ * max_bytes_; }

void ShmAllreduce::Synchronize() {
  Check(MPI_Win_sync(window_), "MPI_Win_sync");
  Check(MPI_Barrier(comm_), "MPI_Barrier");
  Check(MPI_Win_sync(window_), "MPI_Win_sync");
}

// Segment r of a chunk: elements [count * r / size, count * (r + 1) / size).
void ShmAllreduce::ReduceOwnSegment(const void* input, int64_t count, DataType dtype, ReduceOp op) {
  const int64_t element = DataTypeSize(dtype);
  if (count * element > max_bytes_) throw Error("shared-memory allreduce: chunk too large");
  if (input != Slot(rank_)) std::memcpy(Slot(rank_), input, count * element);
  Synchronize();
  const int64_t lo = count * rank_ / size_, hi = count * (rank_ + 1) / size_;
  char* mine = Slot(rank_) + lo * element;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) ReduceInto(Slot(r) + lo * element, mine, hi - lo, dtype, op);
  }
  Synchronize();
}

void ShmAllreduce::CopyOutSegments(void* output, int64_t count, int64_t element) const {
  auto out = static_cast<char*>(output);
  for (int r = 0; r < size_; ++r) {
    const int64_t start = count * r / size_ * element, end = count * (r + 1) / size_ * element;
    std::memcpy(out + start, Slot(r) + start, end - start);
  }
}

void ShmAllreduce::Run(const void* input, void* output, int64_t count, DataType dtype,
                       ReduceOp op) {
  ReduceOwnSegment(input, count, dtype, op);
  CopyOutSegments(output, count, DataTypeSize(dtype));
  buffer_ ^= 1;
}

// Local rank 0 overwrites its slot with the final result only after the second
// barrier, when every rank has finished reading its segment; the others read it after
// the third. The next run uses the other slot of each pair, and the one after that
// starts with a barrier only passed once everyone has copied this result out.
void ShmAllreduce::RunThrough(const void* input, void* output, int64_t count, DataType dtype,
                              ReduceOp op, const std::function<void(void*)>& across_hosts) {
  const int64_t bytes = count * DataTypeSize(dtype);
  ReduceOwnSegment(input, count, dtype, op);
  if (rank_ == 0) {
    CopyOutSegments(output, count, DataTypeSize(dtype));
    across_hosts(output);
    std::memcpy(Slot(0), output, bytes);
  }
  Synchronize();
  if (rank_ != 0) std::memcpy(output, Slot(0), bytes);
  buffer_ ^= 1;
}

}  // namespace lockstep
