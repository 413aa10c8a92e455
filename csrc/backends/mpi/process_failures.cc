#include "backends/mpi/process_failures.h"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <chrono>
#include <thread>

#include "negotiation/peer_deadline.h"

namespace lockstep {
namespace {

// Agreements that may come back inconclusive in a row before one counts as a failure.
constexpr int kAgreementAttempts = 4;

// Whether MPI knows `code` as an error code: MPI_Error_class and MPI_Error_string end
// the job on one it does not (MPI_ERRORS_ARE_FATAL), and Open MPI 5's collectives
// return internal codes such as -1 around a process failure.
bool IsErrorCode(int code) {
  int* last_code = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last_code, &found);
  const int last = found && last_code != nullptr ? *last_code : MPI_ERR_LASTCODE;
  return code > MPI_SUCCESS && code <= std::max(last, static_cast<int>(MPI_ERR_LASTCODE));
}

#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI

// The ranks of `comm` in `group` (a group of its processes), ascending.
std::vector<int> RanksIn(MPI_Group group, MPI_Comm comm) {
  std::vector<int> ranks;
  int count = 0;
  if (group == MPI_GROUP_NULL || MPI_Group_size(group, &count) != MPI_SUCCESS || count == 0) {
    return ranks;
  }
  MPI_Group comm_group = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &comm_group);
  std::vector<int> in_group(count), in_comm(count, MPI_UNDEFINED);
  for (int i = 0; i < count; ++i) in_group[i] = i;
  MPI_Group_translate_ranks(group, count, in_group.data(), comm_group, in_comm.data());
  MPI_Group_free(&comm_group);
  for (int rank : in_comm) {
    if (rank != MPI_UNDEFINED) ranks.push_back(rank);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::vector<int> KnownFailed(MPI_Comm comm);

// ULFM's own classes, or any error while the library knows of a failed process or a
// peer has revoked the communicator: Open MPI also reports a failure inside a
// collective's schedule as MPI_ERR_OTHER or MPI_ERR_IN_STATUS.
bool IsProcessFailure(int mpi_error, MPI_Comm comm) {
  int error_class = MPI_SUCCESS;
  if (IsErrorCode(mpi_error) && MPI_Error_class(mpi_error, &error_class) == MPI_SUCCESS &&
      (error_class == MPIX_ERR_PROC_FAILED || error_class == MPIX_ERR_PROC_FAILED_PENDING ||
       error_class == MPIX_ERR_REVOKED)) {
    return true;
  }
  int revoked = 0;
  MPIX_Comm_is_revoked(comm, &revoked);
  return revoked || !KnownFailed(comm).empty();
}

std::vector<int> KnownFailed(MPI_Comm comm) {
  MPI_Group failed = MPI_GROUP_NULL;
  if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) return {};
  std::vector<int> ranks = RanksIn(failed, comm);
  MPI_Group_free(&failed);
  return ranks;
}

void Revoke(MPI_Comm comm) { MPIX_Comm_revoke(comm); }

bool IsRevoked(MPI_Comm comm) {
  int revoked = 0;
  MPIX_Comm_is_revoked(comm, &revoked);
  return revoked != 0;
}

// Open MPI answers MPI_FT on MPI_COMM_WORLD: whether the job runs with fault
// tolerance on (`mpirun --with-ft ulfm`); without it a lost process ends the job.
bool FaultToleranceOn() {
  void* value = nullptr;
  int found = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPIX_FT, &value, &found) != MPI_SUCCESS || !found) {
    return false;
  }
  return value != nullptr && *static_cast<int*>(value) != 0;
}

int Shrink(MPI_Comm comm, MPI_Comm* survivors) { return MPIX_Comm_shrink(comm, survivors); }

int StartAgreement(MPI_Comm comm, int* flag, MPI_Request* request) {
  return MPIX_Comm_iagree(comm, flag, request);
}

#else  // an MPI without ULFM ends the job itself on a lost process

bool IsProcessFailure(int, MPI_Comm) { return false; }
std::vector<int> KnownFailed(MPI_Comm) { return {}; }
void Revoke(MPI_Comm) {}
bool IsRevoked(MPI_Comm) { return false; }
bool FaultToleranceOn() { return false; }
int Shrink(MPI_Comm, MPI_Comm*) { return MPI_ERR_UNSUPPORTED_OPERATION; }
int StartAgreement(MPI_Comm, int*, MPI_Request*) { return MPI_ERR_UNSUPPORTED_OPERATION; }

#endif

}  // namespace

std::string DescribeKnownFailure(MPI_Comm comm, const std::vector<std::string>& hostnames) {
  if (comm == MPI_COMM_NULL || !SurvivesProcessFailures()) return "";
  // MPI learns of a failure (its detector's heartbeats) and of a peer's revocation only
  // while some call drives its progress: a rank waiting on shared memory alone once
  // waited here for good while the others had revoked. A probe drives it and takes
  // no message.
  int pending = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &pending, MPI_STATUS_IGNORE);
  const std::vector<int> failed = KnownFailed(comm);
  if (failed.empty() && !IsRevoked(comm)) return "";
  Revoke(comm);  // as after an MPI error: every survivor's calls on it fail now
  if (failed.empty())
    return "a process of the job was lost (another rank revoked the communicator)";
  return DescribeRanksOnHosts(failed, hostnames) + (failed.size() == 1 ? " was" : " were") +
         " lost (MPI reports the process failed)";
}

std::string ErrorText(int mpi_error) {
  if (!IsErrorCode(mpi_error)) return "error code " + std::to_string(mpi_error);
  char text[MPI_MAX_ERROR_STRING];
  int length = 0, error_class = 0;
  MPI_Error_string(mpi_error, text, &length);
  MPI_Error_class(mpi_error, &error_class);
  return std::string(text, length) + " (class " + std::to_string(error_class) + ")";
}

bool SurvivesProcessFailures() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized && FaultToleranceOn();
}

int ShrinkToSurvivors(MPI_Comm comm, MPI_Comm* survivors) {
  *survivors = MPI_COMM_NULL;
  return Shrink(comm, survivors);
}

namespace {

enum class Outcome { kDone, kFailed, kTimedOut };

// One agreement, polled until `give_up` (none when `bounded` is false): a frozen rank
// would otherwise hold every other one here. `*flag` is both contribution and result;
// the caller leaks it on kTimedOut, since the request stays pending and writes it later.
Outcome AgreeOnce(MPI_Comm comm, int* flag, bool bounded,
                  std::chrono::steady_clock::time_point give_up) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (StartAgreement(comm, flag, &request) != MPI_SUCCESS) return Outcome::kFailed;
  int done = 0;
  int rc = MPI_SUCCESS;
  while (true) {
    rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || done) break;
    if (bounded && std::chrono::steady_clock::now() >= give_up) return Outcome::kTimedOut;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return rc == MPI_SUCCESS ? Outcome::kDone : Outcome::kFailed;
}

}  // namespace

Agreement AgreeEveryProcessAlive(MPI_Comm comm, double timeout_seconds) {
  const bool bounded = timeout_seconds > 0;
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(timeout_seconds));
  // ULFM reports a failed process through the return code, the same on every rank.
  // Every rank contributes 1, yet Open MPI 5.0.11 has returned success with 0 on every
  // rank (seen after MPI_Comm_spawn and a merge, with no process failed): that result says nothing
  // about failures, and since every rank got it, all agree again together.
  for (int attempt = 0; attempt < kAgreementAttempts; ++attempt) {
    int* flag = new int(1);
    const Outcome outcome = AgreeOnce(comm, flag, bounded, give_up);
    if (outcome == Outcome::kTimedOut) return Agreement::kTimedOut;  // `flag` leaks
    const int result = *flag;
    delete flag;
    if (outcome == Outcome::kFailed) return Agreement::kProcessFailed;
    if (result == 1) return Agreement::kAllAlive;
  }
  return Agreement::kProcessFailed;
}

std::vector<int> LostProcesses(int mpi_error, MPI_Comm comm, double wait_seconds) {
  if (comm == MPI_COMM_NULL || !IsProcessFailure(mpi_error, comm)) return {};
  Revoke(comm);
  // A rank that learns of the failure through the revocation may hear of the failed
  // process itself a little later.
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(wait_seconds));
  std::vector<int> failed = KnownFailed(comm);
  while (failed.empty() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    failed = KnownFailed(comm);
  }
  return failed;
}

std::string DescribeLostProcesses(int mpi_error, MPI_Comm comm,
                                  const std::vector<std::string>& hostnames) {
  if (comm == MPI_COMM_NULL || !IsProcessFailure(mpi_error, comm)) return "";
  const std::vector<int> lost = LostProcesses(mpi_error, comm);
  if (lost.empty()) return "a process of the job was lost (another rank revoked the communicator)";
  return DescribeRanksOnHosts(lost, hostnames) + (lost.size() == 1 ? " was" : " were") +
         " lost (MPI reports the process failed)";
}

std::vector<std::string> HostnamesOf(MPI_Comm comm, MPI_Comm world_comm,
                                     const std::vector<std::string>& world_hostnames) {
  MPI_Group comm_group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &comm_group);
  MPI_Comm_group(world_comm, &world_group);
  int size = 0;
  MPI_Group_size(comm_group, &size);
  std::vector<int> mine(size), world(size, MPI_UNDEFINED);
  for (int i = 0; i < size; ++i) mine[i] = i;
  MPI_Group_translate_ranks(comm_group, size, mine.data(), world_group, world.data());
  MPI_Group_free(&comm_group);
  MPI_Group_free(&world_group);
  std::vector<std::string> hostnames;
  for (int rank : world) {
    const bool known = rank >= 0 && static_cast<size_t>(rank) < world_hostnames.size();
    hostnames.push_back(known ? world_hostnames[rank] : std::string("?"));
  }
  return hostnames;
}

}  // namespace lockstep
