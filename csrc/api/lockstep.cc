// The public API: one process-wide Engine behind a mutex. This file is the only owner
// of process-wide lockstep state.
#include "lockstep/lockstep.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backends/gpu_collectives.h"
#include "backends/gpu_info.h"
#include "backends/mpi/mpi_world.h"
#include "common/config.h"
#include "common/host_buffer_pool.h"
#include "engine/engine.h"
#include "submit/handle_table.h"
#include "submit/spec_validation.h"

namespace lockstep {
namespace {

struct ProcessState {
  // Serializes Init() calls. Init holds only this while it starts MPI and the engine
  // (seconds, and Open MPI takes its own locks and starts threads) and while it stops
  // a stale engine, whose last completion callbacks may call into lockstep and so
  // need `mutex`: holding `mutex` there would deadlock them and stall every caller.
  std::mutex init_mutex;
  std::mutex mutex;  // guards the fields below; held only briefly, never around MPI
  std::shared_ptr<Engine> engine;
  HandleTable handles;  // outlives engines so handles can be waited on after shutdown
  OpNamer namer;        // outlives engines, like the frontends' op counters it serves
  bool was_shut_down = false;
  bool exit_hook_registered = false;
  // The process that called Init(); a fork's child is another. Read without `mutex`
  // (see InForkedChild), so atomic.
  std::atomic<pid_t> owner_pid{0};
  // Set in the child by an atfork handler registered at the first Init(): every op
  // checks it, and a flag costs nothing where getpid() is a system call.
  std::atomic<bool> forked_child{false};
  bool atfork_registered = false;  // guarded by init_mutex
};

ProcessState& State() {
  static ProcessState* state = new ProcessState();  // never destroyed: used at exit
  return *state;
}

void ShutdownAtExit() { Shutdown(); }

void MarkForkedChild() { State().forked_child.store(true, std::memory_order_relaxed); }

// A child of fork() inherits the engine's memory but neither its background thread
// nor its MPI connection: waiting on it would hang and shutting it down would join a
// thread that does not exist. Checked before taking any lock, since a lock held by
// another thread at fork() time stays held forever in the child.
bool InForkedChild(const ProcessState& state) {
  return state.forked_child.load(std::memory_order_relaxed);
}

std::string ForkedChildMessage(const ProcessState& state) {
  return "lockstep was initialized in process " + std::to_string(state.owner_pid) +
         " and this process (" + std::to_string(getpid()) +
         ") is a fork of it; a forked child cannot use or re-initialize its parent's lockstep "
         "(the background thread and the MPI connection stay with the parent). Call lockstep "
         "from the parent only, or start workers with multiprocessing's 'spawn' method";
}

void RequireOwnerProcess(const ProcessState& state) {
  if (InForkedChild(state)) throw Error(ForkedChildMessage(state));
}

const char* MissingEngineMessage(const ProcessState& state) {
  return state.was_shut_down ? "lockstep has been shut down; call hvd.init() again before using it"
                             : "lockstep has not been initialized; call hvd.init() first";
}

std::shared_ptr<Engine> RunningEngine() {
  ProcessState& state = State();
  RequireOwnerProcess(state);
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.engine) throw Error(MissingEngineMessage(state));
  return state.engine;
}

}  // namespace

void Init() {
  ProcessState& state = State();
  RequireOwnerProcess(state);
  std::lock_guard<std::mutex> init_lock(state.init_mutex);
  std::shared_ptr<Engine> stale;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.engine && state.engine->running()) return;
    stale.swap(state.engine);  // stopped because another rank shut down: start afresh
  }
  stale.reset();  // joins its background thread, outside `mutex`
  Config config;
  try {
    config = ConfigFromEnvironment();
  } catch (const ConfigError& e) {
    throw Error(e.what());
  }
  HostBufferPool::Process().SetCapacity(static_cast<size_t>(config.host_buffer_cache_bytes));
  auto engine = std::make_shared<Engine>(config, state.handles, state.namer);
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.engine = std::move(engine);
    state.owner_pid = getpid();
  }
  if (!state.atfork_registered) {  // guarded by init_mutex
    pthread_atfork(nullptr, nullptr, MarkForkedChild);
    state.atfork_registered = true;
  }
  if (!state.exit_hook_registered) {  // guarded by init_mutex
    // Registered after MPI's own exit hook, so it runs before MPI is finalized.
    std::atexit(ShutdownAtExit);
    state.exit_hook_registered = true;
  }
}

void Shutdown() {
  ProcessState& state = State();
  // In a forked child (e.g. at its exit) there is nothing of ours to stop; the
  // inherited engine is left alone, never destroyed.
  if (InForkedChild(state)) return;
  std::shared_ptr<Engine> engine;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    engine.swap(state.engine);
    if (engine) state.was_shut_down = true;
  }
  if (engine) engine->Shutdown();
  // Results handed out still return their buffers; only what is cached now goes.
  if (engine) HostBufferPool::Process().Release();
}

bool CanRecoverInProcess() { return MpiWorldCanShrink(); }

bool EveryProcessAlive() { return RunningEngine()->EveryProcessAlive(); }

void RecoverWithSurvivors() {
  ProcessState& state = State();
  RequireOwnerProcess(state);
  {
    std::lock_guard<std::mutex> init_lock(state.init_mutex);
    std::shared_ptr<Engine> stale;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      stale.swap(state.engine);
    }
    // Joins its background thread. One still running (it had not met the loss yet)
    // stops at its shutdown exchange, which fails on the lost peers.
    stale.reset();
    ShrinkMpiWorld();
  }
  Init();
}

bool IsInitialized() {
  ProcessState& state = State();
  if (InForkedChild(state)) return false;
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.engine && state.engine->running();
}

std::string NotRunningReason() {
  ProcessState& state = State();
  if (InForkedChild(state)) return ForkedChildMessage(state);
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.engine) return MissingEngineMessage(state);
  return state.engine->running() ? std::string() : state.engine->stop_reason();
}

Topology GetTopology() { return RunningEngine()->topology(); }
std::vector<std::string> Hostnames() { return RunningEngine()->hostnames(); }
bool MpiThreadsSupported() { return RunningEngine()->threads_supported(); }
bool MpiBuilt() { return true; }
MpiInfo GetMpiInfo() { return QueryMpiInfo(); }

// Scripts written for Horovod choose the GPU when nccl_built() is nonzero; whether
// this process can run GPU collectives is GetNcclInfo().problem.
int NcclBuilt() { return BuiltNcclVersion(); }

void* GpuStream(int device, int32_t process_set_id) { return GpuStreamOf(device, process_set_id); }

void OrderStreamAfter(const OpResult& result, void* stream) {
  if (result.gpu_done) GpuStreamWaitDone(*result.gpu_done, stream);
}

NcclInfo GetNcclInfo() { return QueryNcclInfo(); }

void StartTimeline(const std::string& path, bool mark_cycles) {
  auto engine = RunningEngine();
  if (engine->topology().rank == 0) engine->timeline().Start(path, mark_cycles);
}

void StopTimeline() { RunningEngine()->timeline().Stop(); }

EngineStats GetEngineStats() { return RunningEngine()->stats(); }

std::vector<Handle> Submit(std::vector<OpSpec> specs, SubmitOptions options) {
  if (specs.empty()) return {};
  auto engine = RunningEngine();
  if (options.drive != nullptr && !options.done.empty()) {
    engine->EnqueueAndDrive(std::move(specs), options.grouped, std::move(options.done),
                            *options.drive);
    return {};
  }
  return engine->Enqueue(std::move(specs), options.grouped, std::move(options.done),
                         options.wake_background);
}

void CheckOpArguments(const OpSpec& spec, int set_size, int world_size, bool rank_known) {
  ValidateArguments(spec, set_size, world_size, rank_known);
}

std::string AutoName(const std::string& kind, int32_t process_set_id) {
  return State().namer.NameFor(kind, process_set_id);
}

int32_t AddProcessSet(std::vector<int> ranks) {
  return RunningEngine()->AddProcessSet(std::move(ranks));
}

void RemoveProcessSet(int32_t id) { RunningEngine()->RemoveProcessSet(id); }

std::vector<int32_t> ProcessSetIds() { return RunningEngine()->process_sets().Ids(); }

std::vector<int> ProcessSetRanks(int32_t id) {
  return RunningEngine()->process_sets().RanksOrThrow(id);
}

bool Poll(Handle handle) {
  RequireOwnerProcess(State());
  return State().handles.Poll(handle);
}

OpResult Wait(Handle handle) {
  ProcessState& state = State();
  RequireOwnerProcess(state);  // the parent's handles never complete in a child
  std::shared_ptr<Engine> engine;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    engine = state.engine;
  }
  // After shutdown, handles still report how their ops ended.
  return engine ? engine->Wait(handle) : state.handles.Wait(handle);
}

OpResult Run(OpSpec spec) { return RunningEngine()->Run(std::move(spec)); }

}  // namespace lockstep
