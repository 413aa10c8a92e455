#include "backends/mpi/mpi_context.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "backends/mpi/launch_check.h"
#include "backends/mpi/mpi_world.h"
#include "backends/mpi/process_failures.h"
#include "negotiation/exchange.h"

namespace lockstep {
namespace {

const char* Getenv(const char* name) { return std::getenv(name); }

bool g_lockstep_initialized_mpi = false;  // MPI itself is process-wide state.
pid_t g_mpi_owner_pid = 0;                // a forked child must not finalize its parent's MPI
std::atomic<bool> g_peers_lost{false};
// The survivors' communicator once processes were lost (ULFM), else MPI_COMM_NULL.
// Changed only by ShrinkMpiWorld, while no engine is running.
MPI_Comm g_survivors = MPI_COMM_NULL;

void InitializeMpi(int* thread_level) {
  int already = 0;
  MPI_Initialized(&already);
  if (already) {
    MPI_Query_thread(thread_level);
    if (*thread_level < MPI_THREAD_SERIALIZED) {
      throw Error(
          "MPI was initialized by the program with a thread level below "
          "MPI_THREAD_SERIALIZED; lockstep calls MPI from a background thread. Initialize MPI "
          "with MPI_THREAD_MULTIPLE (mpi4py does by default).");
    }
    return;
  }
  // Busy polling starves the training threads on machines with few cores; let the
  // user override it, but default to yielding.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  // Open MPI 5's UCX one-sided component fails its start-up query on hosts without
  // UCX devices and says so on every rank; lockstep's windows use the shared-memory one.
  setenv("OMPI_MCA_osc", "^ucx", /*overwrite=*/0);
  // Another MPI's launcher would hang MPI_Init or start N one-rank jobs.
  const std::string mismatch = LauncherMismatch(Getenv, QueryMpiInfo());
  if (!mismatch.empty()) throw Error(mismatch);
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    throw Error("MPI_Init_thread failed");
  }
  g_lockstep_initialized_mpi = true;
  g_mpi_owner_pid = getpid();
  std::atexit(FinalizeMpiAtExitIfOwned);
  *thread_level = provided;
}

}  // namespace

MpiContext::MpiContext() {
  InitializeMpi(&thread_level_);
  if (MPI_Comm_dup(WorldBase(), &comm_) != MPI_SUCCESS) {
    throw Error("MPI_Comm_dup of the job's world failed (was a process lost meanwhile?)");
  }
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (SurvivesProcessFailures()) {
    MPI_Comm_dup(comm_, &agreement_comm_);
    MPI_Comm_set_errhandler(agreement_comm_, MPI_ERRORS_RETURN);
  }
  MPI_Comm_rank(comm_, &topology_.rank);
  MPI_Comm_size(comm_, &topology_.size);
  // The launcher's size is the world's at start, not the survivors' after a loss.
  const std::string mismatch = g_survivors != MPI_COMM_NULL
                                   ? std::string()
                                   : WorldSizeMismatch(Getenv, topology_.size, QueryMpiInfo());
  if (!mismatch.empty()) {
    MPI_Comm_free(&comm_);
    throw Error(mismatch);
  }

  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, topology_.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &topology_.local_rank);
  MPI_Comm_size(local, &topology_.local_size);
  // Ranks with the same local rank on different hosts form the cross communicator.
  MPI_Comm cross = MPI_COMM_NULL;
  MPI_Comm_split(comm_, topology_.local_rank, topology_.rank, &cross);
  MPI_Comm_rank(cross, &topology_.cross_rank);
  MPI_Comm_size(cross, &topology_.cross_size);
  MPI_Comm_free(&local);
  MPI_Comm_free(&cross);
  GatherHostnames();
}

void MpiContext::GatherHostnames() {
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(mine, &length);
  std::vector<char> all(static_cast<size_t>(MPI_MAX_PROCESSOR_NAME) * topology_.size);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                MPI_CHAR, comm_);
  for (int r = 0; r < topology_.size; ++r) {
    const char* name = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hostnames_.emplace_back(name, strnlen(name, MPI_MAX_PROCESSOR_NAME));
  }
}

MpiContext::~MpiContext() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (agreement_comm_ != MPI_COMM_NULL) MPI_Comm_free(&agreement_comm_);
}

bool MpiContext::EveryProcessAlive(double timeout_seconds) const {
  if (agreement_comm_ == MPI_COMM_NULL) return true;
  switch (AgreeEveryProcessAlive(agreement_comm_, timeout_seconds)) {
    case Agreement::kAllAlive:
      return true;
    case Agreement::kProcessFailed:
      return false;
    case Agreement::kTimedOut:
      break;
  }
  std::ostringstream message;
  message << "lockstep stopped: some rank did not take part in the elastic agreement within "
          << timeout_seconds
          << " s (LOCKSTEP_PEER_TIMEOUT_SECONDS): frozen, overloaded or cut off from the network";
  throw PeerTimeout(message.str());
}

void FinalizeMpiAtExitIfOwned() {
  if (!g_lockstep_initialized_mpi || getpid() != g_mpi_owner_pid) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_peers_lost) MPI_Finalize();
}

void MarkPeersLost() { g_peers_lost = true; }

MPI_Comm WorldBase() { return g_survivors == MPI_COMM_NULL ? MPI_COMM_WORLD : g_survivors; }

bool MpiWorldCanShrink() { return SurvivesProcessFailures(); }

void ShrinkMpiWorld() {
  if (!SurvivesProcessFailures()) {
    throw Error(
        "lockstep cannot go on without the lost processes: that needs an MPI with ULFM "
        "(Open MPI 5, which lockstep installs) and a job started with `mpirun --with-ft ulfm` "
        "(lockstep-run does so for elastic jobs)");
  }
  MPI_Comm base = WorldBase();
  MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
  MPI_Comm survivors = MPI_COMM_NULL;
  const int rc = ShrinkToSurvivors(base, &survivors);
  if (rc != MPI_SUCCESS || survivors == MPI_COMM_NULL) {
    throw Error("MPIX_Comm_shrink failed (error " + std::to_string(rc) +
                "): the survivors of a lost process could not form a new job");
  }
  MPI_Comm_set_errhandler(survivors, MPI_ERRORS_RETURN);
  if (g_survivors != MPI_COMM_NULL) MPI_Comm_free(&g_survivors);
  g_survivors = survivors;
  // MPI_Finalize stays skipped (g_peers_lost): with failed processes in MPI_COMM_WORLD it
  // waited for them forever (Open MPI 5.0.11, processes lost on another host).
}

}  // namespace lockstep
