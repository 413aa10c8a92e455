// The per-process engine: owns MPI, the background thread and everything it drives.
// User threads call Enqueue/Wait; only the background thread touches MPI.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/mpi/mpi_context.h"
#include "backends/mpi/mpi_ops.h"
#include "backends/mpi/mpi_types.h"
#include "common/config.h"
#include "common/logging.h"
#include "engine/autotune_driver.h"
#include "engine/collective_watchdog.h"
#include "engine/handle_table.h"
#include "engine/op_namer.h"
#include "engine/op_runner.h"
#include "engine/tensor_queue.h"
#include "engine/timeline.h"
#include "negotiation/controller.h"

namespace lockstep {

class Engine {
 public:
  // Starts MPI (if needed) and the background thread. `handles` outlives the engine
  // so that a handle can still be waited on after shutdown; `namer` is process-wide
  // too, and the engine restarts its counters when a join completes.
  Engine(const Config& config, HandleTable& handles, OpNamer& namer);
  ~Engine();  // Shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Topology& topology() const { return mpi_.topology(); }
  bool threads_supported() const { return mpi_.threads_supported(); }
  bool running() const { return running_.load(); }
  std::string stop_reason() const;
  Timeline& timeline() { return timeline_; }
  EngineStats stats() const;

  // `callbacks` is empty (the caller waits on the returned handles) or holds one
  // callback per spec.
  std::vector<Handle> Enqueue(std::vector<OpSpec> specs, bool grouped,
                              std::vector<DoneCallback> callbacks = {});
  // Stops the loop on every rank (the others see the request in their next cycle)
  // and fails whatever is still pending. Idempotent.
  void Shutdown();

 private:
  void Loop();
  void WaitForNextCycle();
  void AdmitNewEntries();
  void Execute(const std::vector<Response>& planned);
  void ExecuteOne(const Response& response);
  void Complete(const std::string& name, Status status, OpResult result);
  void FailEverything(const std::string& reason);
  void UpdateBackoff(bool made_progress, const NegotiationResult& result);
  void CountCycle(const NegotiationResult& result);
  static int64_t BytesOf(const std::vector<Response>& responses);
  void ApplyTunedSettings(const TunedSettings& settings);

  Config config_;
  MpiContext mpi_;
  Logger logger_;
  MpiTypes mpi_types_;
  MpiBackend mpi_backend_;
  Timeline timeline_;
  HandleTable& handles_;
  OpNamer& namer_;
  TensorQueue queue_;
  Controller controller_;
  OpRunner runner_;
  CollectiveWatchdog watchdog_;  // destroyed before the backend it watches

  // Background-thread state.
  std::unordered_map<std::string, TensorEntry> pending_;
  bool joined_ = false;
  std::chrono::microseconds backoff_{0};
  // Idle cycles come every cycle_time * idle_stretch_; it doubles per cycle in which no
  // rank had work, up to kMaxIdleStretch.
  static constexpr int kMaxIdleStretch = 16;
  int idle_stretch_ = 1;
  std::string gpu_unavailable_;               // why GPU tensors are refused (see ValidateSpec)
  std::unique_ptr<AutotuneDriver> autotune_;  // null unless LOCKSTEP_AUTOTUNE is on

  // Written by the background thread only, read by any thread through stats().
  std::atomic<int64_t> cycles_{0}, full_rounds_{0}, cached_responses_{0}, negotiated_responses_{0};

  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> running_{false};
  mutable std::mutex stop_mutex_;
  std::string stop_reason_;
  std::thread thread_;
};

}  // namespace lockstep
