// The per-process engine: owns MPI, the background thread and everything it drives.
// User threads call Enqueue/Wait; only the background thread touches MPI.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/communicator.h"
#include "common/config.h"
#include "common/logging.h"
#include "engine/autotune_driver.h"
#include "engine/collective_watchdog.h"
#include "engine/cycle_driver.h"
#include "engine/process_set.h"
#include "engine/process_set_table.h"
#include "engine/timeline.h"
#include "submit/handle_table.h"
#include "submit/op_namer.h"
#include "submit/tensor_queue.h"

namespace lockstep {

class Engine {
 public:
  // Starts MPI (if needed) and the background thread. `handles` outlives the engine
  // so that a handle can still be waited on after shutdown; `namer` is process-wide
  // too, and the engine restarts its counters when a join completes.
  Engine(const Config& config, HandleTable& handles, OpNamer& namer);
  // The same over a transport already started (tests pass one of their own).
  Engine(World world, const Config& config, HandleTable& handles, OpNamer& namer);
  ~Engine();  // Shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Topology& topology() const { return world_.topology; }
  // [r]: global rank r's host (MPI_Get_processor_name), gathered at start-up.
  const std::vector<std::string>& hostnames() const { return world_.hostnames; }
  bool threads_supported() const { return world_.threads_supported; }
  bool running() const { return running_.load(); }
  // Collective; see lockstep::EveryProcessAlive.
  bool EveryProcessAlive() const;
  std::string stop_reason() const;
  Timeline& timeline() { return timeline_; }
  EngineStats stats() const;

  // `callbacks` is empty (the caller waits on the returned handles) or holds one
  // callback per spec. `wake_loop` false: the caller is about to Wait and run the
  // cycle itself, so waking the background thread would only make it compete (where
  // callers may not run cycles, the loop is woken all the same).
  std::vector<Handle> Enqueue(std::vector<OpSpec> specs, bool grouped,
                              std::vector<DoneCallback> callbacks = {}, bool wake_loop = true);
  // Blocks until the op is done and returns its result (throws Error when it failed).
  // While no other thread is running cycles, the calling thread runs them itself
  // (engine_driving.cc).
  OpResult Wait(Handle handle);
  // Enqueue one op and Wait for it: the synchronous hot path.
  OpResult Run(OpSpec spec);
  // Enqueue ops that report through callbacks, then run the cycles on this thread
  // while they are pending, no other thread is running cycles, and `drive` allows
  // (its budget checked between cycles): a small op's callback usually runs on this
  // thread, after it has let go of the cycles, before this returns. What is still
  // pending then goes to the background loop. For kernels of frameworks that must not
  // block until every rank arrives.
  void EnqueueAndDrive(std::vector<OpSpec> specs, bool grouped, std::vector<DoneCallback> callbacks,
                       const KernelDrive& drive);
  // Collective over all ranks, like every change of the process sets: each rank
  // proposes the change (a kProcessSetChange message), and the background threads
  // apply it (or fail it everywhere, when ranks disagree) at the same point of the
  // same cycle. Returns the new set's id.
  int32_t AddProcessSet(std::vector<int> ranks);
  void RemoveProcessSet(int32_t id);
  const ProcessSetTable& process_sets() const { return table_; }

  // Stops the loop on every rank (the others see the request in their next cycle)
  // and fails whatever is still pending. Idempotent.
  void Shutdown();

 private:
  // The topology ops on the spec's set validate against; translates a broadcast's
  // root from a global rank to its rank in the set. Throws Error for sets that do not
  // exist or that this rank is not in.
  Topology TopologyFor(OpSpec& spec) const;
  lockstep::IdleWait IdleWait();
  static std::chrono::microseconds CycleTime(const Config& config);
  // engine_driving.cc: the threads that run cycles, each holding driver_'s turn (the
  // rules of who may: engine/cycle_driver.h): the background loop, a caller waiting
  // for its own op, a framework kernel.
  void Loop();
  void DriveCycle();  // turn held
  // Runs cycles until each of the `count` handles is done (or the engine stops), or
  // until `deadline` passes between two cycles, or after `max_cycles` (0: no limit).
  // Turn held. A pointer and count, so that a synchronous op's Wait passes its one
  // handle without allocating.
  void DriveUntilDone(const Handle* handles, size_t count,
                      std::chrono::steady_clock::time_point deadline, int max_cycles = 0);
  std::chrono::microseconds TimeUntilNextCycle();  // turn held
  void Stop(const std::string& reason);            // turn held
  bool RunCycles();                                // false when the ranks agreed to shut down
  bool RunSetCycle(ProcessSet& set, NegotiationResult& result);
  bool AnyPending() const;
  bool AnyUnsent() const;
  // A validated entry for one op, its request built; no handle yet. Throws Error.
  TensorEntry EntryFor(OpSpec spec, int64_t group_id, int32_t group_size);
  // Moves entries that hold their handles into the queue; when the queue refuses them
  // (a name in flight, or the engine stopped), forgets their handles and throws.
  void Submit(TensorEntry* entries, size_t count, bool wake_loop);
  // One ungrouped op without Enqueue's vectors (Run, EnqueueAndDrive): its handle.
  Handle SubmitOne(OpSpec spec, DoneCallback on_done, bool wake_loop);
  void AdmitNewEntries();
  // `reduced`: the response's data rode with negotiation's bits and is reduced already
  // (NegotiationResult::ridden_payload); null: it runs its collective.
  void ExecuteOne(ProcessSet& set, const Response& response, const void* reduced = nullptr);
  void FinishJoin(ProcessSet& set, const Response& response);
  void PollGpuFailures();
  void Complete(ProcessSet& set, const std::string& name, Status status, OpResult result);
  void FailEverything(const std::string& reason);
  void UpdateBackoff(bool made_progress, bool had_pending, const NegotiationResult& result);
  void CountCycle(const NegotiationResult& result);
  void StartAutotune();
  static int64_t BytesOf(const std::vector<Response>& responses);
  void ApplyTunedSettings(const TunedSettings& settings);
  // process_set_changes.cc
  int32_t ProposeChange(const ProcessSetChange& change);
  void FinishChange(ProcessSet& set, const Response& response);
  OpResult ApplyChange(const ProcessSetChange& change);  // throws Error
  void CreateSet(int32_t id, const std::vector<int>& ranks);
  void DropSet(int32_t id);

  Config config_;
  World world_;
  Logger logger_;
  Timeline timeline_;
  HandleTable& handles_;
  OpNamer& namer_;
  TensorQueue queue_;
  ProcessSetTable table_;

  // Every set's backend marks its blocking calls here; declared before the sets that
  // use it and the watchdog that reads it.
  CallClock call_clock_;
  // Background-thread state: the sets this rank is in, by id (0 = global, first).
  std::map<int32_t, std::unique_ptr<ProcessSet>> sets_;
  bool joined_ = false;
  std::vector<TensorEntry> admitted_;          // AdmitNewEntries' buffer, kept for its capacity
  std::vector<Request> admit_batch_;           // AdmitNewEntries' too
  std::vector<TensorEntry*> execute_entries_;  // ExecuteOne's, likewise
  std::chrono::microseconds backoff_{0};
  // Idle cycles come every cycle_time * idle_stretch_; it doubles per cycle in which no
  // rank had work, up to kMaxIdleStretch.
  static constexpr int kMaxIdleStretch = 32;
  int idle_stretch_ = 1;
  std::string gpu_unavailable_;               // why GPU tensors are refused (see ValidateSpec)
  std::unique_ptr<AutotuneDriver> autotune_;  // null unless LOCKSTEP_AUTOTUNE is on
  // Declared after the sets, so it stops before the backends it watches are gone.
  std::unique_ptr<CollectiveWatchdog> watchdog_;

  // Written by the background thread only, read by any thread through stats().
  std::atomic<int64_t> cycles_{0}, full_rounds_{0}, cached_responses_{0}, negotiated_responses_{0};

  // Who runs the cycles. Whoever holds its turn owns every piece of cycle state above.
  CycleDriver driver_;
  std::chrono::steady_clock::time_point last_cycle_end_;  // turn held

  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> running_{false};
  mutable std::mutex stop_mutex_;
  std::string stop_reason_;
  std::thread thread_;
};

}  // namespace lockstep
