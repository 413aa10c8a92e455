#include "backends/mpi/shm_allreduce.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "lockstep/values.h"
#include "negotiation/exchange.h"
#include "reduction/reduce_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lockstep {
namespace {

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("shared-memory allreduce: ") + what + " failed");
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// A peer that arrives within this is only a little behind (the ranks did the same
// work): spinning catches it at once. A later one is descheduled or busy elsewhere,
// and the core may be needed by this rank's own training thread (mpirun binds a rank's
// threads to one core), so the wait then sleeps, in steps that grow to kLongestPause.
// Capping them at 50 us instead woke the background thread twice as often while
// training, for 5.4-5.9% of a core against 3.8-4.9% (benchmarks/studies/training_wakeups.py).
constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr auto kFirstPause = std::chrono::microseconds(5);
constexpr auto kLongestPause = std::chrono::microseconds(200);
// How often a sleeping wait asks whether MPI knows of a failed peer (ULFM).
constexpr auto kFailureCheckEvery = std::chrono::milliseconds(20);

}  // namespace

ShmAllreduce::ShmAllreduce(MPI_Comm comm, int64_t max_bytes, bool cores_shared,
                           FailureCheck failure_check)
    : max_bytes_(max_bytes), cores_shared_(cores_shared), failure_check_(std::move(failure_check)) {
  int world = 0;
  MPI_Comm_size(comm, &world);
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  // Every rank computes the same answer, so all of them go on (or not) together.
  if (size_ != world || size_ < 2 || max_bytes_ <= 0) return;

  // Counters, then two slots per rank: consecutive runs alternate, so a rank may start
  // filling the next run's slot while slower ranks still read this one.
  auto segment = std::make_unique<SharedSegment>(comm_, kHeaderBytes + 2 * max_bytes_);
  if (!segment->Mapped()) return;  // the same answer on every rank
  segment_ = std::move(segment);
  bases_.resize(size_);
  for (int r = 0; r < size_; ++r) bases_[r] = segment_->Part(r);  // page-aligned
  // Loads and stores go straight to shared memory, ordered by the counters' acquire
  // and release (lock-free atomics work across processes that map the same memory).
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters must be lock-free");
  Counters* own = new (bases_[rank_]) Counters;
  own->arrived.value.store(0);
  own->reduced.value.store(0);
  own->result.value.store(0);
  // Nobody polls a counter before its owner has zeroed it.
  Check(MPI_Barrier(comm_), "MPI_Barrier");
}

ShmAllreduce::~ShmAllreduce() {
  // The segment is unmapped here alone (a rank that shuts down never waits for ranks
  // that have not); the communicator is freed if MPI still runs.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

char* ShmAllreduce::Slot(int rank) const {
  return bases_[rank] + kHeaderBytes + static_cast<int64_t>(run_ & 1) * max_bytes_;
}

ShmAllreduce::Counters& ShmAllreduce::CountersOf(int rank) const {
  return *std::launder(reinterpret_cast<Counters*>(bases_[rank]));
}

void ShmAllreduce::Raise(Counter Counters::*which) {
  (CountersOf(rank_).*which).value.store(run_, std::memory_order_release);
}

void ShmAllreduce::WaitForAll(Counter Counters::*which) {
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) WaitFor(CountersOf(r).*which);
  }
}

// Spins while the peer is at most a little behind (yielding the core on every poll
// where ranks outnumber cores), then sleeps between polls.
void ShmAllreduce::WaitFor(const Counter& counter) const {
  if (counter.value.load(std::memory_order_acquire) >= run_) return;
  const auto started = std::chrono::steady_clock::now();
  for (uint32_t polls = 1;; ++polls) {
    if (counter.value.load(std::memory_order_acquire) >= run_) return;
    if (cores_shared_) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
    if (polls % 64 == 0 && std::chrono::steady_clock::now() - started >= kSpinFor) break;
  }
  auto next_check = started + kFailureCheckEvery;
  for (auto pause = kFirstPause;; pause = std::min(pause * 2, kLongestPause)) {
    std::this_thread::sleep_for(pause);
    if (counter.value.load(std::memory_order_acquire) >= run_) return;
    if (failure_check_ && std::chrono::steady_clock::now() >= next_check) {
      const std::string failure = failure_check_();
      if (!failure.empty()) throw PeerTimeout("shared-memory allreduce: " + failure);
      next_check = std::chrono::steady_clock::now() + kFailureCheckEvery;
    }
  }
}

// Checks the chunk fits and moves to the next run (and so to the other slots).
int64_t ShmAllreduce::StartRun(int64_t bytes) {
  if (bytes > max_bytes_) throw Error("shared-memory allreduce: chunk too large");
  ++run_;
  return bytes;
}

// Runs use the slots of their parity. A rank writes a slot again two runs later, after
// seeing every rank arrive at the run in between, which each does only after it has
// finished reading the slots of the run before. The input may be the output.
void ShmAllreduce::Run(const void* input, void* output, int64_t count, DataType dtype,
                       ReduceOp op) {
  const int64_t element = DataTypeSize(dtype);
  const int64_t bytes = StartRun(count * element);
  if ((size_ - 1) * bytes <= kOnePassBytes) {
    std::memcpy(Slot(rank_), input, bytes);
    Raise(&Counters::arrived);
    WaitForAll(&Counters::arrived);
    // Past the first two contributions the output is already written, and it may be
    // the input: a later rank reads its own from its slot.
    ReduceInRankOrder(rank_ < 2 ? input : Slot(rank_), 0, count, dtype, op, output);
    return;
  }
  ReduceSegments(input, count, dtype, op);
  CopyOutSegments(output, count, element);
}

// Local rank 0 overwrites its slot with the final result once every rank has reduced
// its segment (nobody reads slot 0 after that in this run) and raises its "result"
// counter; the others copy it out then.
void ShmAllreduce::RunThrough(const void* input, void* output, int64_t count, DataType dtype,
                              ReduceOp op, const std::function<void(void*)>& across_hosts) {
  const int64_t element = DataTypeSize(dtype);
  const int64_t bytes = StartRun(count * element);
  ReduceSegments(input, count, dtype, op);
  if (rank_ == 0) {
    CopyOutSegments(output, count, element);
    across_hosts(output);
    std::memcpy(Slot(0), output, bytes);
    Raise(&Counters::result);
  } else {
    WaitFor(CountersOf(0).result);
    std::memcpy(output, Slot(0), bytes);
  }
}

// Segment r of a chunk: elements [count * r / size, count * (r + 1) / size).
int64_t ShmAllreduce::SegmentStart(int rank, int64_t count) const { return count * rank / size_; }

// Shares the segments the other ranks reduce (a rank reads its own from its input,
// which nothing writes before the copy-out), reduces its own into its slot, and
// returns once every rank has.
void ShmAllreduce::ReduceSegments(const void* input, int64_t count, DataType dtype, ReduceOp op) {
  const int64_t element = DataTypeSize(dtype);
  const int64_t lo = SegmentStart(rank_, count), hi = SegmentStart(rank_ + 1, count);
  std::memcpy(Slot(rank_), input, lo * element);
  std::memcpy(Slot(rank_) + hi * element, static_cast<const char*>(input) + hi * element,
              (count - hi) * element);
  Raise(&Counters::arrived);
  WaitForAll(&Counters::arrived);
  ReduceInRankOrder(input, lo, hi - lo, dtype, op, Slot(rank_) + lo * element);
  Raise(&Counters::reduced);
  WaitForAll(&Counters::reduced);
}

// destination = ((x0 op x1) op x2) ... over elements [first, first + count) of every
// rank's contribution, this rank's read from `own`: the same operands in the same
// order whichever rank computes them and whether the chunk was split, so every rank
// gets the same bits.
void ShmAllreduce::ReduceInRankOrder(const void* own, int64_t first, int64_t count, DataType dtype,
                                     ReduceOp op, void* destination) const {
  const int64_t offset = first * DataTypeSize(dtype);
  auto contribution = [&](int rank) {
    return (rank == rank_ ? static_cast<const char*>(own) : Slot(rank)) + offset;
  };
  ReduceTo(contribution(1), contribution(0), destination, count, dtype, op);
  for (int r = 2; r < size_; ++r) ReduceInto(contribution(r), destination, count, dtype, op);
}

void ShmAllreduce::CopyOutSegments(void* output, int64_t count, int64_t element) const {
  auto out = static_cast<char*>(output);
  for (int r = 0; r < size_; ++r) {
    const int64_t start = SegmentStart(r, count) * element;
    const int64_t end = SegmentStart(r + 1, count) * element;
    std::memcpy(out + start, Slot(r) + start, end - start);
  }
}

}  // namespace lockstep
