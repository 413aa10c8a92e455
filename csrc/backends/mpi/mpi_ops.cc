#include "backends/mpi/mpi_ops.h"

#include <algorithm>
#include <climits>
#include <string>

#include "backends/mpi/mpi_context.h"
#include "backends/mpi/process_failures.h"
#include "lockstep/values.h"
#include "negotiation/exchange.h"

namespace lockstep {
namespace {

// MPI counts are ints; larger transfers are split into pieces below this size.
constexpr int64_t kMaxCount = INT_MAX / 2;

// The v-collectives take int counts and displacements; describe bytes with a larger
// unit when the total would not fit.
struct ByteLayout {
  MPI_Datatype unit = MPI_BYTE;
  int64_t unit_bytes = 1;
  std::vector<int> counts, displacements;
};

int64_t CommonUnit(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  int64_t total = 0;
  for (int64_t v : a) total += v;
  for (int64_t v : b) total += v;
  int64_t unit = 1;
  while (total / unit > kMaxCount && unit < (int64_t{1} << 20)) {
    bool divides =
        std::all_of(a.begin(), a.end(), [&](int64_t v) { return v % (unit * 2) == 0; }) &&
        std::all_of(b.begin(), b.end(), [&](int64_t v) { return v % (unit * 2) == 0; });
    if (!divides) break;
    unit *= 2;
  }
  if (total / unit > INT_MAX) throw Error("transfer too large for one MPI v-collective");
  return unit;
}

ByteLayout MakeLayout(const std::vector<int64_t>& bytes, int64_t unit_bytes, MPI_Datatype unit) {
  ByteLayout layout;
  layout.unit = unit;
  layout.unit_bytes = unit_bytes;
  int64_t offset = 0;
  for (int64_t b : bytes) {
    layout.counts.push_back(static_cast<int>(b / unit_bytes));
    layout.displacements.push_back(static_cast<int>(offset / unit_bytes));
    offset += b;
  }
  return layout;
}

class UnitType {
 public:
  explicit UnitType(int64_t unit_bytes) {
    if (unit_bytes > 1) {
      MPI_Type_contiguous(static_cast<int>(unit_bytes), MPI_BYTE, &type_);
      MPI_Type_commit(&type_);
    }
  }
  ~UnitType() {
    if (type_ != MPI_BYTE) MPI_Type_free(&type_);
  }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_BYTE;
};

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm, const MpiTypes& types, int64_t shm_bytes, int shm_min_ranks,
                       bool hierarchical, bool cores_shared, CallClock& clock,
                       std::vector<std::string> hostnames)
    : comm_(comm),
      types_(types),
      call_clock_(clock),
      hostnames_(std::move(hostnames)),
      adasum_(comm) {
  MPI_Comm_size(comm_, &size_);
  int world_size = 0;
  MPI_Comm_size(WorldBase(), &world_size);
  every_rank_ = size_ == world_size;
  if (shm_min_ranks > 0 && size_ >= shm_min_ranks && shm_bytes > 0) {
    auto shm =
        std::make_unique<ShmAllreduce>(comm_, std::min(shm_bytes, kShmMaxBytes), cores_shared,
                                       [this] { return DescribeKnownFailure(comm_, hostnames_); });
    if (shm->Usable()) shm_ = std::move(shm);
  }
  if (hierarchical && !shm_) {  // collective: every rank asks, or none does
    auto h = std::make_unique<HierarchicalAllreduce>(
        comm_, types_, std::min(shm_bytes, kShmMaxBytes), cores_shared);
    if (h->Usable()) hierarchical_ = std::move(h);
  }
}

void MpiBackend::Check(int rc, const char* what) const {
  if (rc == MPI_SUCCESS) return;
  const std::string lost = DescribeLostProcesses(rc, comm_, hostnames_);
  if (!lost.empty()) throw PeerTimeout(std::string(what) + ": " + lost);
  throw Error(std::string(what) + " failed: " + ErrorText(rc));
}

void MpiBackend::Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                           ReduceOp op) {
  CallClock::Scope timed(call_clock_, every_rank_);
  auto in = static_cast<const char*>(input);
  auto out = static_cast<char*>(output);
  const int64_t element = DataTypeSize(dtype);
  const int64_t bytes = count * element;
  if (shm_active() && bytes <= shm_->max_bytes()) {
    shm_->Run(input, output, count, dtype, op);
    return;
  }
  if (hierarchical_ && bytes <= hierarchical_->max_bytes()) {
    hierarchical_->Run(input, output, count, dtype, op);
    return;
  }
  for (int64_t done = 0; done < count;) {
    int64_t piece = std::min(count - done, kMaxCount);
    const void* send = (in == out) ? MPI_IN_PLACE : in + done * element;
    Check(MPI_Allreduce(send, out + done * element, static_cast<int>(piece), types_.Datatype(dtype),
                        types_.Op(op, dtype), comm_),
          "MPI_Allreduce");
    done += piece;
  }
}

void MpiBackend::Allgatherv(const void* input, void* output,
                            const std::vector<int64_t>& bytes_per_rank) {
  CallClock::Scope timed(call_clock_, every_rank_);
  int64_t unit = CommonUnit(bytes_per_rank, {});
  UnitType type(unit);
  ByteLayout layout = MakeLayout(bytes_per_rank, unit, type.get());
  int rank = 0;
  MPI_Comm_rank(comm_, &rank);
  Check(MPI_Allgatherv(input, layout.counts[rank], type.get(), output, layout.counts.data(),
                       layout.displacements.data(), type.get(), comm_),
        "MPI_Allgatherv");
}

void MpiBackend::Broadcast(void* buffer, int64_t bytes, int root_rank) {
  CallClock::Scope timed(call_clock_, every_rank_);
  auto data = static_cast<char*>(buffer);
  for (int64_t done = 0; done < bytes;) {
    int64_t piece = std::min(bytes - done, kMaxCount);
    Check(MPI_Bcast(data + done, static_cast<int>(piece), MPI_BYTE, root_rank, comm_), "MPI_Bcast");
    done += piece;
  }
}

void MpiBackend::Alltoallv(const void* input, const std::vector<int64_t>& send_bytes, void* output,
                           const std::vector<int64_t>& recv_bytes) {
  CallClock::Scope timed(call_clock_, every_rank_);
  int64_t unit = CommonUnit(send_bytes, recv_bytes);
  UnitType type(unit);
  ByteLayout send = MakeLayout(send_bytes, unit, type.get());
  ByteLayout recv = MakeLayout(recv_bytes, unit, type.get());
  Check(MPI_Alltoallv(input, send.counts.data(), send.displacements.data(), type.get(), output,
                      recv.counts.data(), recv.displacements.data(), type.get(), comm_),
        "MPI_Alltoallv");
}

void MpiBackend::ReduceScatter(const void* input, void* output, const std::vector<int64_t>& counts,
                               DataType dtype, ReduceOp op) {
  CallClock::Scope timed(call_clock_, every_rank_);
  std::vector<int> int_counts;
  int64_t total = 0;
  for (int64_t c : counts) {
    total += c;
    int_counts.push_back(static_cast<int>(c));
  }
  if (total > INT_MAX) throw Error("reducescatter of more than 2^31 elements is not supported");
  Check(MPI_Reduce_scatter(input, output, int_counts.data(), types_.Datatype(dtype),
                           types_.Op(op, dtype), comm_),
        "MPI_Reduce_scatter");
}

void MpiBackend::Barrier() {
  CallClock::Scope timed(call_clock_, every_rank_);
  Check(MPI_Barrier(comm_), "MPI_Barrier");
}

void MpiBackend::Adasum(void* buffer, const std::vector<int64_t>& counts, DataType dtype) {
  CallClock::Scope timed(call_clock_, every_rank_);
  adasum_.Allreduce(buffer, counts, dtype);
}

}  // namespace lockstep
