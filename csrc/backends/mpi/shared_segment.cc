#include "backends/mpi/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace lockstep {
namespace {

constexpr int kNameBytes = 64;

int64_t RoundUpToPages(int64_t bytes) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

// Unique on the host: the creator's pid, a count of its segments, and a random tag
// (a stale segment of a recycled pid is never reused: O_EXCL refuses it).
std::string NewName() {
  static std::atomic<uint64_t> created{0};
  std::random_device entropy;
  return "/lockstep-" + std::to_string(getpid()) + "-" + std::to_string(created++) + "-" +
         std::to_string(entropy());
}

std::string Failed(const char* what, int error) {
  return std::string(what) + ": " + std::strerror(error);
}

}  // namespace

SharedSegment::SharedSegment(MPI_Comm comm, int64_t part_bytes)
    : part_bytes_(RoundUpToPages(part_bytes)) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  total_bytes_ = part_bytes_ * size;

  // Local rank 0 creates the name; the others learn it ("" if it could not).
  char name[kNameBytes] = {};
  int fd = -1;
  if (rank == 0) {
    const std::string chosen = NewName();
    fd = shm_open(chosen.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      failure_ = Failed("shm_open", errno);
    } else if (ftruncate(fd, total_bytes_) != 0) {
      failure_ = Failed("ftruncate", errno);
    }
    if (fd >= 0) std::strncpy(name, chosen.c_str(), kNameBytes - 1);
  }
  MPI_Bcast(name, kNameBytes, MPI_CHAR, 0, comm);
  if (rank != 0 && name[0] != '\0') {
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) failure_ = Failed("shm_open", errno);
  } else if (rank != 0) {
    failure_ = "local rank 0 could not create the segment";
  }

  void* mapped = MAP_FAILED;
  if (failure_.empty()) {
    // Reserving the part here finds a full /dev/shm now (tmpfs refuses with ENOSPC)
    // and places its pages on this rank's memory node.
    const int reserved = posix_fallocate(fd, rank * part_bytes_, part_bytes_);
    if (reserved != 0) failure_ = Failed("posix_fallocate on /dev/shm", reserved);
  }
  if (failure_.empty()) {
    mapped = mmap(nullptr, total_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) failure_ = Failed("mmap", errno);
  }
  if (fd >= 0) close(fd);

  int ok = failure_.empty(), all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  // Every rank has opened the name by now (or given up): it is needed no longer.
  if (rank == 0 && name[0] != '\0') shm_unlink(name);
  if (!all_ok) {
    if (mapped != MAP_FAILED) munmap(mapped, total_bytes_);
    if (failure_.empty()) failure_ = "another rank of this host could not map the segment";
    return;
  }
  base_ = static_cast<char*>(mapped);
}

SharedSegment::~SharedSegment() {
  if (base_ != nullptr) munmap(base_, total_bytes_);
}

}  // namespace lockstep
