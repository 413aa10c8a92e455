// A POSIX shared-memory segment that every rank of a one-host communicator maps, with
// a page-aligned part per rank. It replaces an MPI shared window (MPI_Win_allocate_
// shared) for two reasons: freeing a window is collective, so a rank could only leak
// it once a peer had failed (one per recovery in process), and Open MPI's window
// component is not made for use after a process failure (ULFM warns so). Unmapping a
// segment is local, and the name is unlinked as soon as every rank has it mapped, so
// nothing is left in /dev/shm, even by a rank that is killed.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace lockstep {

class SharedSegment {
 public:
  // Collective over `comm` (all of whose ranks share a host). Each rank reserves its own
  // part of `part_bytes` (rounded up to pages), so its pages are placed near it and a
  // full /dev/shm is found here, not as a SIGBUS later. Mapped() is false on every
  // rank if any rank failed; why is in failure().
  SharedSegment(MPI_Comm comm, int64_t part_bytes);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  bool Mapped() const { return base_ != nullptr; }
  const std::string& failure() const { return failure_; }
  // Where rank `rank`'s part starts in this process (page-aligned).
  char* Part(int rank) const { return base_ + rank * part_bytes_; }

 private:
  char* base_ = nullptr;
  int64_t part_bytes_ = 0;
  int64_t total_bytes_ = 0;
  std::string failure_;
};

}  // namespace lockstep
