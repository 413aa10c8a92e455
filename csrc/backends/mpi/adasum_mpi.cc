#include "backends/mpi/adasum_mpi.h"

#include <algorithm>
#include <climits>
#include <string>

#include "lockstep/values.h"
#include "reduction/adasum.h"

namespace lockstep {
namespace {

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("Adasum: ") + what + " failed");
}

}  // namespace

AdasumMpi::AdasumMpi(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void AdasumMpi::EnsureLevelComms() {
  if (!level_comms_.empty()) return;
  for (int level = 1, k = 0; level < size_; level <<= 1, ++k) {
    MPI_Comm group = MPI_COMM_NULL;
    Check(MPI_Comm_split(comm_, rank_ >> (k + 1), rank_, &group), "MPI_Comm_split");
    level_comms_.push_back(group);
  }
}

void AdasumMpi::Exchange(const void* send, int64_t send_bytes, void* recv, int64_t recv_bytes,
                         int peer) {
  if (send_bytes > INT_MAX || recv_bytes > INT_MAX) {
    throw Error("Adasum of more than 2 GiB in one response is not supported");
  }
  Check(MPI_Sendrecv(send, static_cast<int>(send_bytes), MPI_BYTE, peer, 0, recv,
                     static_cast<int>(recv_bytes), MPI_BYTE, peer, 0, comm_, MPI_STATUS_IGNORE),
        "MPI_Sendrecv");
}

void AdasumMpi::Allreduce(void* buffer, const std::vector<int64_t>& counts, DataType dtype) {
  if (size_ == 1) return;
  if ((size_ & (size_ - 1)) != 0) {
    throw Error("Adasum needs a power-of-2 number of ranks, but there are " + std::to_string(size_),
                Status::Code::kInvalidArgument);
  }
  EnsureLevelComms();
  std::vector<int64_t> starts = {0};  // starts.back() is the total element count
  for (int64_t c : counts) starts.push_back(starts.back() + c);
  const int64_t element = DataTypeSize(dtype);
  char* data = static_cast<char*>(buffer);
  received_.resize(static_cast<size_t>((starts.back() / 2 + 1) * element));

  // Down: halve the slice at each level, combining the half this rank keeps.
  std::vector<Slice> parents;
  Slice slice{0, starts.back()};
  for (int level = 1, k = 0; level < size_; level <<= 1, ++k) {
    const bool left = (rank_ & level) == 0;
    const int64_t first = slice.n / 2;
    const Slice mine = left ? Slice{slice.lo, first} : Slice{slice.lo + first, slice.n - first};
    const Slice theirs = left ? Slice{slice.lo + first, slice.n - first} : Slice{slice.lo, first};
    Exchange(data + theirs.lo * element, theirs.n * element, received_.data(), mine.n * element,
             rank_ ^ level);
    Combine(data + mine.lo * element, received_.data(), mine, left, k, starts, dtype);
    parents.push_back(slice);
    slice = mine;
  }
  // Up: swap finished slices with the same partners in reverse order.
  for (int k = static_cast<int>(parents.size()) - 1; k >= 0; --k) {
    const Slice parent = parents[k];
    const Slice other = slice.lo == parent.lo ? Slice{parent.lo + slice.n, parent.n - slice.n}
                                              : Slice{parent.lo, parent.n - slice.n};
    Exchange(data + slice.lo * element, slice.n * element, data + other.lo * element,
             other.n * element, rank_ ^ (1 << k));
    slice = parent;
  }
}

// mine/theirs hold this slice's elements from the two halves of the group; `left` says
// whether this rank's half is the lower-ranked one. Norms travel in a fixed order
// (left's, then right's) so that the group's sums pair up.
void AdasumMpi::Combine(char* mine, const char* theirs, Slice slice, bool left, int level_index,
                        const std::vector<int64_t>& starts, DataType dtype) {
  const int64_t element = DataTypeSize(dtype);
  const size_t tensors = starts.size() - 1;
  std::vector<double> sums(3 * tensors, 0.0);
  auto for_each_piece = [&](auto&& visit) {
    for (size_t t = 0; t < tensors; ++t) {
      const int64_t lo = std::max(starts[t], slice.lo);
      const int64_t hi = std::min(starts[t + 1], slice.lo + slice.n);
      if (hi > lo) visit(t, (lo - slice.lo) * element, hi - lo);
    }
  };
  for_each_piece([&](size_t t, int64_t offset, int64_t n) {
    const AdasumDots d = AdasumPartialDots(mine + offset, theirs + offset, n, dtype);
    sums[3 * t] = d.dot;
    sums[3 * t + 1] = left ? d.a_sq : d.b_sq;
    sums[3 * t + 2] = left ? d.b_sq : d.a_sq;
  });
  Check(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM,
                      level_comms_[level_index]),
        "MPI_Allreduce of dot products");
  for_each_piece([&](size_t t, int64_t offset, int64_t n) {
    const double dot = sums[3 * t];
    const double own_sq = left ? sums[3 * t + 1] : sums[3 * t + 2];
    const double other_sq = left ? sums[3 * t + 2] : sums[3 * t + 1];
    AdasumScaledAdd(mine + offset, theirs + offset, n, dtype, AdasumCoefficient(dot, own_sq),
                    AdasumCoefficient(dot, other_sq));
  });
}

}  // namespace lockstep
