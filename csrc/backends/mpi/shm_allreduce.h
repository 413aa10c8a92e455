// Allreduce through shared memory (a SharedSegment), for jobs whose ranks all share one host.
// Each rank copies its chunk into its own slot and raises its "arrived" counter; once
// all have, each rank reduces the whole chunk itself. Larger chunks are split instead:
// each rank copies in the segments the others reduce, reduces its own segment into its
// slot, raises its "reduced" counter, and once all have, copies every segment out.
// Either way every element is reduced in rank order, ((x0 op x1) op x2) ..., so every
// rank gets the same bits. The ranks wait for each other on those counters, not on MPI
// barriers: a barrier is a round of messages, which cost 4x the data movement itself
// at 64 KiB.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/mpi/shared_segment.h"
#include "lockstep/types.h"

namespace lockstep {

class ShmAllreduce {
 public:
  // Says why a peer will never arrive (a process failure MPI knows of), or "".
  using FailureCheck = std::function<std::string()>;

  // Collective over `comm`. Usable() is false when the ranks span several hosts or the
  // shared memory cannot be mapped; the caller then stays with MPI. `cores_shared`: this host
  // runs more ranks than it has cores, so a waiting rank yields its core between polls.
  // `failure_check` (optional) is asked now and then while a wait sleeps: what it
  // returns ends the wait with PeerTimeout (no MPI call would notice a dead peer here).
  ShmAllreduce(MPI_Comm comm, int64_t max_bytes, bool cores_shared,
               FailureCheck failure_check = nullptr);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  bool Usable() const { return segment_ != nullptr; }
  int64_t max_bytes() const { return max_bytes_; }

  // input may equal output. count * element size must not exceed max_bytes().
  void Run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);
  // The same, except that local rank 0 passes the host's reduced chunk (in `output`)
  // through `across_hosts` first, and the others take the result from its slot: a
  // hierarchical allreduce's first and last steps.
  void RunThrough(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op,
                  const std::function<void(void*)>& across_hosts);

 private:
  // Each rank's progress through its runs, in its own part of the segment, one cache
  // line per counter so that pollers of one do not disturb the writer of another.
  struct alignas(128) Counter {
    std::atomic<uint64_t> value;
  };
  struct Counters {
    Counter arrived;  // this run's input is in the slot
    Counter reduced;  // this rank's segment of this run is reduced
    Counter result;   // (local rank 0, hierarchical) the final result is in the slot
  };
  static constexpr int64_t kHeaderBytes = sizeof(Counters);
  // Up to this many bytes of other ranks' data, a rank reduces the whole chunk itself:
  // one wait instead of two. Splitting moves less data, which wins from 256 KiB at 2
  // ranks (benchmarks/studies/shm_vs_mpi.c).
  static constexpr int64_t kOnePassBytes = 128 * 1024;

  int64_t StartRun(int64_t bytes);
  int64_t SegmentStart(int rank, int64_t count) const;
  void ReduceSegments(const void* input, int64_t count, DataType dtype, ReduceOp op);
  void ReduceInRankOrder(const void* own, int64_t first, int64_t count, DataType dtype, ReduceOp op,
                         void* destination) const;
  void CopyOutSegments(void* output, int64_t count, int64_t element) const;
  void Raise(Counter Counters::*which);
  void WaitForAll(Counter Counters::*which);
  void WaitFor(const Counter& counter) const;
  char* Slot(int rank) const;
  Counters& CountersOf(int rank) const;

  MPI_Comm comm_ = MPI_COMM_NULL;           // this host's ranks (all of the job's)
  std::unique_ptr<SharedSegment> segment_;  // null unless every rank mapped it
  int rank_ = 0;
  int size_ = 1;
  int64_t max_bytes_ = 0;
  bool cores_shared_ = false;
  FailureCheck failure_check_;
  std::vector<char*> bases_;  // each rank's counters and slot pair, mapped into this process
  uint64_t run_ = 0;          // runs so far, the same on every rank; odd and even use a slot each
};

}  // namespace lockstep
