// Runtime settings read from LOCKSTEP_* environment variables (with HOROVOD_*
// aliases so existing Horovod job scripts keep their tuning).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace lockstep {

enum class LogLevel { kTrace, kDebug, kInfo, kWarning, kError, kFatal };

// Lower-case name, the same spelling LOCKSTEP_LOG_LEVEL accepts.
const char* LogLevelName(LogLevel level);

// How collectives on GPU tensors run: NCCL on the device, or MPI on host copies
// staged through pinned memory (Horovod's HOROVOD_GPU_OPERATIONS=MPI).
enum class GpuOperations { kNccl, kMpi };
const char* GpuOperationsName(GpuOperations operations);

struct Config {
  int64_t fusion_threshold_bytes = 128 * 1024 * 1024;  // 0 disables fusion
  // Allreduces run in pieces of this many bytes so each piece's copies and reduction
  // stay in cache (measured several times faster than one call on 64+ MiB here);
  // 0 runs each response in one call.
  int64_t chunk_bytes = 1024 * 1024;
  // Jobs whose ranks all share one host, with at least this many ranks, reduce
  // allreduce chunks through shared memory instead of MPI; 0: never. "auto" and "on"
  // are 2 (measured 1.6-2x MPI_Allreduce at 2 ranks from 16 KiB to 4 MiB, and faster
  // at 3: docs/PERFORMANCE.md, "Shared memory without barriers"), "off" 0.
  int shm_allreduce_min_ranks = 2;
  double cycle_time_ms = 1.0;  // how long an idle background thread sleeps between cycles
  int cache_capacity = 1024;   // 0 disables the response cache
  // Bytes of payload lane in each cycle's bit exchange: a lone small cached allreduce
  // reduces inside negotiation's one collective instead of in a second one of its own
  // (Controller::FillLane says when); 0: no lane. A multiple of 8, at most 256. Bit
  // for bit the same results as without it (docs/PERFORMANCE.md, "What negotiation
  // carries").
  int negotiation_payload_bytes = 64;
  std::string timeline_path;  // empty: no timeline at start
  bool timeline_mark_cycles = false;
  double stall_check_seconds = 60.0;  // 0 or stall_check_disabled: no stall warnings
  bool stall_check_disabled = false;
  double stall_shutdown_seconds = 0.0;  // 0: never fail stalled ops
  // How long negotiation waits for another rank before naming it unresponsive (frozen,
  // cut off) and stopping with an error on every rank that is left; 0: forever.
  double peer_timeout_seconds = 60.0;
  // Allreduce in three steps when ranks span hosts: within each host through shared
  // memory, across hosts among one leader per host, then back within each host.
  bool hierarchical_allreduce = false;
  // A thread waiting for its op runs the negotiation cycles itself while no other
  // thread does (engine/cycle_driver.h); false: only the background thread runs them.
  bool caller_cycles = true;
  LogLevel log_level = LogLevel::kWarning;
  // Most bytes of freed large host results (64 KiB+) kept for reuse
  // (common/host_buffer_pool.h); 0 keeps none.
  int64_t host_buffer_cache_bytes = 128 * 1024 * 1024;

  // LOCKSTEP_GPU_OPERATIONS (alias HOROVOD_GPU_OPERATIONS): nccl unless set. Where
  // libnccl cannot be loaded, GPU tensors fall back to mpi unless nccl was asked for.
  GpuOperations gpu_operations = GpuOperations::kNccl;
  bool gpu_operations_set = false;
  // Device fusion buffer: fused GPU allreduces hold at most this many bytes; 0
  // disables GPU fusion. Separate from the host's, because fusing on the device pays
  // off up to sizes where host fusion (a copy through the CPU's caches) loses.
  int64_t gpu_fusion_threshold_bytes = 128 * 1024 * 1024;
  // A GPU collective not finished after this long aborts the set's NCCL communicator
  // and fails the set's later GPU ops naming it; 0: never.
  double nccl_timeout_seconds = 300.0;

  // LOCKSTEP_AUTOTUNE: tune fusion threshold, chunk size, cycle time and the
  // shared-memory switch online (engine/autotuner.h); what the user set stays fixed.
  bool autotune = false;
  std::string autotune_log;             // CSV of the measured windows, written by rank 0
  int autotune_warmup_windows = 3;      // discarded before the first trial
  int autotune_cycles_per_window = 10;  // cycles that executed collectives, per window
  // Which tunable settings the environment set.
  bool fusion_threshold_set = false;
  bool chunk_bytes_set = false;
  bool cycle_time_set = false;
  bool shm_allreduce_set = false;
};

constexpr int kMaxCacheCapacity = 1 << 16;
constexpr int kMaxNegotiationPayloadBytes = 256;  // wire/cycle_lane.h's kMaxLanePayloadBytes

// A setting that is present but malformed; the message names the variable, the
// value and what was expected.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `lookup` returns the value of an environment variable or nullptr; injected so
// tests need not touch the real environment. Throws ConfigError.
Config ParseConfig(const std::function<const char*(const char*)>& lookup);
Config ConfigFromEnvironment();  // ParseConfig(std::getenv)

// One line, for debug logging.
std::string Describe(const Config& config);

}  // namespace lockstep
