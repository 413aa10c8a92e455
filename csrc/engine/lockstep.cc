// The public API: one process-wide Engine behind a mutex. This file is the only owner
// of process-wide lockstep state.
#include "lockstep/lockstep.h"

#include <cstdlib>
#include <mutex>

#include "common/config.h"
#include "engine/engine.h"
#include "engine/handle_table.h"

namespace lockstep {
namespace {

struct ProcessState {
  std::mutex mutex;
  std::shared_ptr<Engine> engine;
  HandleTable handles;  // outlives engines so handles can be waited on after shutdown
  OpNamer namer;        // outlives engines, like the frontends' op counters it serves
  bool was_shut_down = false;
  bool exit_hook_registered = false;
};

ProcessState& State() {
  static ProcessState* state = new ProcessState();  // never destroyed: used at exit
  return *state;
}

void ShutdownAtExit() { Shutdown(); }

const char* MissingEngineMessage(const ProcessState& state) {
  return state.was_shut_down ? "lockstep has been shut down; call hvd.init() again before using it"
                             : "lockstep has not been initialized; call hvd.init() first";
}

std::shared_ptr<Engine> RunningEngine() {
  ProcessState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.engine) throw Error(MissingEngineMessage(state));
  return state.engine;
}

}  // namespace

void Init() {
  ProcessState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.engine && state.engine->running()) return;
  state.engine.reset();  // stopped because another rank shut down: start afresh
  Config config;
  try {
    config = ConfigFromEnvironment();
  } catch (const ConfigError& e) {
    throw Error(e.what());
  }
  state.engine = std::make_shared<Engine>(config, state.handles, state.namer);
  if (!state.exit_hook_registered) {
    // Registered after MPI's own exit hook, so it runs before MPI is finalized.
    std::atexit(ShutdownAtExit);
    state.exit_hook_registered = true;
  }
}

void Shutdown() {
  ProcessState& state = State();
  std::shared_ptr<Engine> engine;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    engine.swap(state.engine);
    if (engine) state.was_shut_down = true;
  }
  if (engine) engine->Shutdown();
}

bool IsInitialized() {
  ProcessState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.engine && state.engine->running();
}

std::string NotRunningReason() {
  ProcessState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.engine) return MissingEngineMessage(state);
  return state.engine->running() ? std::string() : state.engine->stop_reason();
}

Topology GetTopology() { return RunningEngine()->topology(); }
bool MpiThreadsSupported() { return RunningEngine()->threads_supported(); }
bool MpiBuilt() { return true; }

bool NcclBuilt() {
#ifdef LOCKSTEP_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

void StartTimeline(const std::string& path, bool mark_cycles) {
  auto engine = RunningEngine();
  if (engine->topology().rank == 0) engine->timeline().Start(path, mark_cycles);
}

void StopTimeline() { RunningEngine()->timeline().Stop(); }

Handle Enqueue(OpSpec spec) {
  std::vector<OpSpec> one;
  one.push_back(std::move(spec));
  return RunningEngine()->Enqueue(std::move(one), /*grouped=*/false).front();
}

std::vector<Handle> EnqueueGroup(std::vector<OpSpec> specs) {
  if (specs.empty()) return {};
  return RunningEngine()->Enqueue(std::move(specs), /*grouped=*/true);
}

void EnqueueWithCallback(OpSpec spec, DoneCallback done) {
  std::vector<OpSpec> one;
  one.push_back(std::move(spec));
  std::vector<DoneCallback> callbacks;
  callbacks.push_back(std::move(done));
  RunningEngine()->Enqueue(std::move(one), /*grouped=*/false, std::move(callbacks));
}

void EnqueueGroupWithCallbacks(std::vector<OpSpec> specs, std::vector<DoneCallback> done) {
  if (specs.empty()) return;
  RunningEngine()->Enqueue(std::move(specs), /*grouped=*/true, std::move(done));
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

bool Poll(Handle handle) { return State().handles.Poll(handle); }
OpResult Wait(Handle handle) { return State().handles.Wait(handle); }

}  // namespace lockstep
