#include "engine/process_set.h"

#include "backends/host/payload_lane.h"
#include "engine/process_set_table.h"
#include "wire/cycle_bits.h"
#include "wire/cycle_lane.h"

namespace lockstep {
namespace {

// Shared memory (also the hierarchical allreduce's) only for the global set: its
// window is never freed before MPI_Finalize (freeing is collective), so sets added
// and removed at run time would leak one window each. With autotuning free to pick
// them, the window is made as large as any chunk it may try and exists from 2 ranks,
// so the switch can be tried there too.
int ShmMinRanks(int32_t id, const Config& config) {
  if (id != 0) return 0;
  if (!config.autotune || config.shm_allreduce_set) return config.shm_allreduce_min_ranks;
  return 2;
}

int64_t ShmWindowBytes(const Config& config) {
  return config.autotune && !config.chunk_bytes_set ? HostBackendOptions::kLargestShm
                                                    : config.chunk_bytes;
}

std::vector<std::string> HostnamesOf(const std::vector<int>& ranks,
                                     const std::vector<std::string>& hostnames) {
  std::vector<std::string> mine;
  for (int rank : ranks) mine.push_back(hostnames.at(rank));
  return mine;
}

std::unique_ptr<Exchange> NewExchange(Communicator& comm, const Config& config, IdleWait idle_wait,
                                      std::vector<std::string> hostnames) {
  ExchangeOptions options;
  options.hostnames = std::move(hostnames);
  options.timeout_seconds = config.peer_timeout_seconds;
  options.idle_wait = std::move(idle_wait);
  options.idle_poll_cap = std::chrono::microseconds(
      std::max<int64_t>(50, static_cast<int64_t>(config.cycle_time_ms * 1000)));
  options.and_words = CycleBitsWords(config.cache_capacity);
  const int lane_bytes = Controller::LaneBytes(config);
  options.combine_words = lane_bytes > 0 ? CycleVectorWords(config.cache_capacity, lane_bytes) : 0;
  options.combine = &CombineLaneVectors;
  return comm.NewExchange(std::move(options));
}

HostBackendOptions HostOptions(int32_t id, const Config& config) {
  HostBackendOptions options;
  options.shm_bytes = ShmWindowBytes(config);
  options.shm_min_ranks = ShmMinRanks(id, config);
  options.hierarchical = id == 0 && config.hierarchical_allreduce;
  return options;
}

GpuCollectivesOptions GpuOptions(int32_t id, Communicator& comm, const Config& config) {
  GpuCollectivesOptions options;
  options.communicator = &comm;
  options.process_set_id = id;
  options.operations = config.gpu_operations;
  options.nccl_timeout_seconds = config.nccl_timeout_seconds;
  return options;
}

}  // namespace

ProcessSet::ProcessSet(int32_t id, std::shared_ptr<Communicator> comm, std::vector<int> ranks,
                       const Topology& topology, const Config& config, const Logger& logger,
                       Timeline& timeline, IdleWait idle_wait,
                       const std::vector<std::string>& hostnames, CallClock& clock)
    : id_(id),
      comm_(std::move(comm)),
      ranks_(std::move(ranks)),
      topology_(topology),
      backend_(comm_->NewHostBackend(HostOptions(id, config), clock)),
      controller_(NewExchange(*comm_, config, std::move(idle_wait), HostnamesOf(ranks_, hostnames)),
                  topology_, config, logger),
      runner_(topology_, *backend_, timeline, config.chunk_bytes, GpuOptions(id, *comm_, config),
              [this](const std::string& name) -> const OpSpec* {
                auto it = pending_.find(name);
                return it == pending_.end() ? nullptr : &it->second.spec;
              }) {
  if (id_ != 0) controller_.SetScope(Scope());
  controller_.SetLaneSource(&runner_.payload_lane());
}

std::string ProcessSet::Scope() const {
  if (id_ == 0) return "";
  return " (on process set " + std::to_string(id_) + ", whose ranks 0, 1, ... are global ranks " +
         DescribeRanks(ranks_) + ")";
}

}  // namespace lockstep
