#include "engine/process_set.h"

#include "engine/process_set_table.h"

namespace lockstep {
namespace {

// Shared memory only for the global set: its window is never freed before
// MPI_Finalize (freeing is collective), so sets added and removed at run time would
// leak one window each.
int ShmMinRanks(int32_t id, const Config& config) {
  return id == 0 ? config.shm_allreduce_min_ranks : 0;
}

}  // namespace

ProcessSet::ProcessSet(int32_t id, MPI_Comm comm, std::vector<int> ranks, const Topology& topology,
                       const Config& config, const Logger& logger, const MpiTypes& types,
                       Timeline& timeline, Controller::IdleWait idle_wait)
    : id_(id),
      comm_(comm),
      ranks_(std::move(ranks)),
      topology_(topology),
      backend_(comm, types, config.chunk_bytes, ShmMinRanks(id, config)),
      controller_(comm, topology_, config, logger, std::move(idle_wait)),
      runner_(topology_, backend_, timeline, config.chunk_bytes) {
  if (id_ != 0) controller_.SetScope(Scope());
}

std::string ProcessSet::Scope() const {
  if (id_ == 0) return "";
  return " (on process set " + std::to_string(id_) + ", whose ranks 0, 1, ... are global ranks " +
         DescribeRanks(ranks_) + ")";
}

ProcessSet::~ProcessSet() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (id_ != 0 && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

}  // namespace lockstep
