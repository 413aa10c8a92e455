#include "engine/engine.h"

#include <pthread.h>

#include <algorithm>

#include "backends/gpu_collectives.h"
#include "backends/mpi/mpi_world.h"
#include "fusion/fusion_buffer.h"
#include "negotiation/peer_deadline.h"
#include "submit/spec_validation.h"

namespace lockstep {
namespace {

// Deterministic from the member names alone, so every rank derives the same id.
int64_t GroupIdFor(const std::vector<OpSpec>& specs) {
  uint64_t hash = 1469598103934665603ull;
  for (const OpSpec& spec : specs) {
    for (char c : spec.name) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    hash = (hash ^ 0xffu) * 1099511628211ull;
  }
  return static_cast<int64_t>(hash | 1u);
}

}  // namespace

std::chrono::microseconds Engine::CycleTime(const Config& config) {
  double micros = std::clamp(config.cycle_time_ms * 1000.0, 1.0, 60e6);
  return std::chrono::microseconds(static_cast<int64_t>(micros));
}

Engine::Engine(const Config& config, HandleTable& handles, OpNamer& namer)
    : Engine(StartMpiWorld(), config, handles, namer) {}

Engine::Engine(World world, const Config& config, HandleTable& handles, OpNamer& namer)
    : config_(config),
      world_(std::move(world)),
      logger_(config.log_level, world_.topology.rank),
      handles_(handles),
      namer_(namer),
      table_(world_.topology.size),
      driver_(config.caller_cycles, world_.any_thread_may_call, world_.ranks_outnumber_cores) {
  sets_[0] =
      std::make_unique<ProcessSet>(0, world_.communicator, *table_.Ranks(0), topology(), config_,
                                   logger_, timeline_, IdleWait(), world_.hostnames, call_clock_);
  // A second past negotiation's own verdict, which names the ranks, comes first.
  watchdog_ = std::make_unique<CollectiveWatchdog>(
      call_clock_, *world_.communicator, world_.communicator->NewSilenceFinder(), world_.hostnames,
      config_.peer_timeout_seconds > 0 ? LongestPeerWaitSeconds(config_.peer_timeout_seconds) + 1
                                       : 0,
      config_.peer_timeout_seconds, logger_);
  gpu_unavailable_ = GpuUnavailableReason(config_);
  if (config_.autotune) StartAutotune();
  if (logger_.Enabled(LogLevel::kDebug)) {
    logger_.Log(LogLevel::kDebug, Describe(config_));
    if (sets_[0]->shm_active()) {
      logger_.Log(LogLevel::kDebug, "allreduce pieces go through shared memory");
    }
    if (sets_[0]->backend().hierarchical_active()) {
      logger_.Log(LogLevel::kDebug,
                  "hierarchical allreduce: shared memory within each host, MPI across hosts");
    }
  }
  if (!config_.timeline_path.empty() && topology().rank == 0) {
    timeline_.Start(config_.timeline_path, config_.timeline_mark_cycles);
  }
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
  // Named here, not by the thread: it may not run for a while (callers drive cycles
  // themselves), and top -H, perf and the tests look for it by this name.
  pthread_setname_np(thread_.native_handle(), "lockstep-bg");
}

void Engine::StartAutotune() {
  // Start from what the job would run with untuned.
  Backend& backend = sets_.at(0)->backend();
  const bool shm_default =
      config_.shm_allreduce_min_ranks > 0 && topology().size >= config_.shm_allreduce_min_ranks;
  backend.set_shm_enabled(shm_default);
  TunedSettings initial{config_.fusion_threshold_bytes, config_.chunk_bytes, config_.cycle_time_ms,
                        backend.shm_active()};
  autotune_ = std::make_unique<AutotuneDriver>(config_, initial, backend.shm_available(),
                                               *world_.communicator, topology().rank, logger_);
}

IdleWait Engine::IdleWait() {
  return [this](std::chrono::microseconds timeout) { return queue_.WaitForWork(timeout); };
}

Engine::~Engine() { Shutdown(); }

std::vector<Handle> Engine::Enqueue(std::vector<OpSpec> specs, bool grouped,
                                    std::vector<DoneCallback> callbacks, bool wake_loop) {
  if (!callbacks.empty() && callbacks.size() != specs.size()) {
    throw Error("internal error: one completion callback per op is required");
  }
  const int64_t group_id = grouped ? GroupIdFor(specs) : 0;
  const int32_t group_size = grouped ? static_cast<int32_t>(specs.size()) : 0;
  std::vector<TensorEntry> entries;
  entries.reserve(specs.size());
  for (OpSpec& spec : specs) {
    if (grouped && spec.process_set_id != specs.front().process_set_id) {
      throw Error("all members of a group must use the same process set",
                  Status::Code::kInvalidArgument);
    }
    entries.push_back(EntryFor(std::move(spec), group_id, group_size));
  }
  std::vector<Handle> handles;
  handles.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].handle = handles_.Allocate(callbacks.empty() ? nullptr : std::move(callbacks[i]));
    handles.push_back(entries[i].handle);
  }
  Submit(entries.data(), entries.size(), driver_.WakeLoopOnSubmit(/*submitter_claims=*/!wake_loop));
  return handles;
}

TensorEntry Engine::EntryFor(OpSpec spec, int64_t group_id, int32_t group_size) {
  // For messages and the timeline only: join is keyed by its type, not by a name.
  if (spec.op == OpType::kJoin) spec.name = OpTypeName(spec.op);
  const Topology set_topology = TopologyFor(spec);
  ValidateSpec(spec, set_topology, gpu_unavailable_);
  TensorEntry entry;
  if (spec.device >= 0 && spec.op != OpType::kBarrier && spec.op != OpType::kJoin) {
    entry.ready_event = RecordGpuInputReady(spec);
  }
  entry.request = RequestFromSpec(spec, set_topology.rank);
  entry.request.group_id = group_id;
  entry.request.group_size = group_size;
  entry.spec = std::move(spec);
  entry.enqueued_at = std::chrono::steady_clock::now();
  return entry;
}

void Engine::Submit(TensorEntry* entries, size_t count, bool wake_loop) {
  try {
    queue_.Push(entries, count, wake_loop);
  } catch (...) {
    for (size_t i = 0; i < count; ++i) handles_.Discard(entries[i].handle);
    throw;
  }
}

void Engine::Shutdown() {
  shutdown_requested_ = true;
  queue_.Wake();  // a caller running cycles sees the flag at its next cycle
  if (thread_.joinable()) thread_.join();
  timeline_.Stop();
}

Topology Engine::TopologyFor(OpSpec& spec) const {
  const int32_t id = spec.process_set_id;
  if (id == 0) return topology();
  auto fail = [&](const std::string& why) {
    throw Error("cannot run '" + spec.name + "' on process set " + std::to_string(id) + ": " + why,
                Status::Code::kInvalidArgument);
  };
  if (spec.op == OpType::kJoin) fail("join runs on the global process set only");
  const auto ranks = table_.Ranks(id);
  if (!ranks) fail("the set does not exist (never added, or removed)");
  const Topology set_topology = SetTopology(*ranks, topology().rank);
  if (set_topology.rank < 0) {
    fail("rank " + std::to_string(topology().rank) + " is not in it (its ranks are " +
         DescribeRanks(*ranks) + ")");
  }
  if (spec.op == OpType::kBroadcast) {
    const int root = SetTopology(*ranks, spec.root_rank).rank;
    if (root < 0) {
      fail("root rank " + std::to_string(spec.root_rank) + " is not in the set (its ranks are " +
           DescribeRanks(*ranks) + ")");
    }
    spec.root_rank = root;  // the set's communicator numbers its members from 0
  }
  return set_topology;
}

// The global set first (it carries shutdown, join and process-set changes), then each
// other set this rank is in, in id order: every member of a set reaches the set's
// collectives in the same order, so no two ranks can wait on each other crosswise.
bool Engine::RunCycles() {
  ProcessSet& global = *sets_.at(0);
  const bool had_pending = AnyPending();
  NegotiationResult result = global.controller().Negotiate(shutdown_requested_, joined_,
                                                           had_pending, driver_.caller_blocked());
  if (result.shutdown) return false;
  CountCycle(result);
  // Only the global set's cycles are the same on every rank, so only they time the
  // autotuner's windows.
  const bool tuning = autotune_ && (!result.responses.empty() || result.ridden != nullptr);
  const int64_t moved =
      tuning ? BytesOf(result.responses) + (result.ridden ? ResponseBytes(*result.ridden) : 0) : 0;
  bool progress = RunSetCycle(global, result);
  if (tuning) {
    if (auto tuned = autotune_->AfterCycle(moved)) ApplyTunedSettings(*tuned);
  }
  for (auto it = std::next(sets_.begin()); it != sets_.end(); ++it) {
    ProcessSet& set = *it->second;
    NegotiationResult own =
        set.controller().Negotiate(false, false, set.HasPending(), driver_.caller_blocked());
    CountCycle(own);
    progress = RunSetCycle(set, own) || progress;
  }
  PollGpuFailures();
  UpdateBackoff(progress, had_pending, result);
  return true;
}

// Asynchronous failures of GPU collectives (a communicator error, a collective past
// LOCKSTEP_NCCL_TIMEOUT_SECONDS) surface here; the set's later GPU ops then fail with
// the same message, while its host ops and the other sets keep working.
void Engine::PollGpuFailures() {
  for (auto& [id, set] : sets_) {
    const std::string failure = set->runner().Poll();
    if (!failure.empty()) logger_.Log(LogLevel::kError, failure + set->Scope());
  }
}

bool Engine::RunSetCycle(ProcessSet& set, NegotiationResult& result) {
  std::vector<Response> responses = std::move(result.responses);
  const bool progress = !responses.empty() || result.ridden != nullptr;
  if (result.ridden != nullptr) {  // done without a collective: kept out of fusion
    ExecuteOne(set, *result.ridden, result.ridden_payload.data());
  }
  if (responses.empty()) return progress;
  const FusionLimits host{config_.fusion_threshold_bytes, config_.chunk_bytes};
  const FusionLimits device{config_.gpu_fusion_threshold_bytes, kDeviceStandaloneBytes};
  for (const Response& response : PlanFusion(std::move(responses), host, device)) {
    ExecuteOne(set, response);
  }
  return progress;
}

bool Engine::AnyPending() const {
  for (const auto& [id, set] : sets_) {
    if (set->HasPending()) return true;
  }
  return false;
}

bool Engine::AnyUnsent() const {
  for (const auto& [id, set] : sets_) {
    if (set->controller().HasUnsent()) return true;
  }
  return false;
}

void Engine::CountCycle(const NegotiationResult& result) {
  const auto relaxed = std::memory_order_relaxed;
  cycles_.fetch_add(1, relaxed);
  if (result.full_round) full_rounds_.fetch_add(1, relaxed);
  cached_responses_.fetch_add(result.cached_responses, relaxed);
  const int64_t responses =
      static_cast<int64_t>(result.responses.size()) + (result.ridden != nullptr ? 1 : 0);
  negotiated_responses_.fetch_add(responses - result.cached_responses, relaxed);
}

EngineStats Engine::stats() const {
  EngineStats stats;
  stats.cycles = cycles_.load();
  stats.full_rounds = full_rounds_.load();
  stats.cached_responses = cached_responses_.load();
  stats.negotiated_responses = negotiated_responses_.load();
  return stats;
}

int64_t Engine::BytesOf(const std::vector<Response>& responses) {
  int64_t bytes = 0;
  for (const Response& response : responses) bytes += ResponseBytes(response);
  return bytes;
}

// Between cycles, identically on every rank: the next cycle plans and runs with these.
void Engine::ApplyTunedSettings(const TunedSettings& settings) {
  config_.fusion_threshold_bytes = settings.fusion_threshold_bytes;
  config_.chunk_bytes = settings.chunk_bytes;
  config_.cycle_time_ms = settings.cycle_time_ms;
  for (auto& [id, set] : sets_) set->runner().set_chunk_bytes(settings.chunk_bytes);
  sets_.at(0)->backend().set_shm_enabled(settings.shm_allreduce);
}

void Engine::UpdateBackoff(bool made_progress, bool had_pending, const NegotiationResult& result) {
  // Every rank holding work that no rank can finish yet would otherwise loop on empty
  // cycles; back off until new work arrives.
  if (made_progress || !result.all_ranks_waiting) {
    backoff_ = std::chrono::microseconds(0);
  } else {
    backoff_ = std::min(std::max(backoff_ * 2, std::chrono::microseconds(50)), CycleTime(config_));
  }
  // While no rank has work at all, idle cycles only watch for shutdown and stalls, so
  // they can grow rarer: each one wakes the thread (and, ranks being out of phase,
  // polls for the others) on a core that is computing. Latency does not suffer: new
  // local work starts a cycle at once, and the others join it as soon as they submit
  // the same collective, which is the earliest it could complete anyway.
  if (made_progress) {
    idle_stretch_ = 1;
  } else if (result.any_rank_waiting) {
    // Some rank waits. When this rank has nothing pending and is in every process set,
    // the waiting rank needs work this rank has not submitted yet, and submitting starts
    // a cycle at once; idle cycles in between would only make it start its wait over
    // (more wake-ups). A rank outside some set keeps cycling: that set's members cycle
    // through the global set's negotiation, so they would wait for this rank's cycles.
    const bool in_every_set = sets_.size() == table_.Ids().size();
    idle_stretch_ = (had_pending || !in_every_set) ? 1 : kMaxIdleStretch;
  } else {
    idle_stretch_ = std::min(idle_stretch_ * 2, kMaxIdleStretch);
  }
}

void Engine::AdmitNewEntries() {
  std::vector<TensorEntry>& entries = admitted_;  // reused: no allocation per cycle
  queue_.PopAll(&entries);
  if (entries.empty()) return;
  // Each set's requests go to its controller in batches of consecutive entries. A
  // group was pushed at once, so it is never split; admit_batch_ is reused.
  int32_t batch_set = 0;
  const auto admit_batch = [&] {
    if (!admit_batch_.empty()) sets_.at(batch_set)->controller().Admit(&admit_batch_);
    admit_batch_.clear();
  };
  for (TensorEntry& entry : entries) {
    const int32_t id = entry.spec.process_set_id;
    auto set = sets_.find(id);
    if (set == sets_.end()) {  // removed after the op was enqueued
      if (!IsControl(entry.request.op)) queue_.Release(id, entry.request.name);
      handles_.Complete(
          entry.handle,
          Status::InvalidArgument("process set " + std::to_string(id) + " was removed before '" +
                                  entry.request.name + "' could run on it"),
          {});
      continue;
    }
    if (entry.request.op == OpType::kJoin) {
      joined_ = true;
      set->second->runner().set_join_device(entry.spec.device);
    }
    if (timeline_.active()) {
      timeline_.Begin(entry.request.name, std::string("NEGOTIATE_") + OpTypeName(entry.request.op));
    }
    if (id != batch_set) admit_batch();
    batch_set = id;
    admit_batch_.push_back(entry.request);
    ProcessSet& target = *set->second;
    if (entry.request.op == OpType::kJoin) {
      target.joins().push_back(std::move(entry));
    } else if (entry.request.op == OpType::kProcessSetChange) {
      target.changes().push_back(std::move(entry));
    } else {
      std::string name = entry.request.name;
      target.pending().emplace(std::move(name), std::move(entry));
    }
  }
  admit_batch();
}

// Dispatches on the response's type: control messages complete the entries kept
// for their type; every other response runs on the tensors it names.
void Engine::ExecuteOne(ProcessSet& set, const Response& response, const void* reduced) {
  auto& pending = set.pending();
  switch (response.type) {
    case ResponseType::kError: {
      const std::string& name = response.names.front();
      if (pending.count(name))
        Complete(set, name, Status::Precondition(response.error_message + set.Scope()), {});
      return;
    }
    case ResponseType::kJoin:
      FinishJoin(set, response);
      return;
    case ResponseType::kProcessSetChange:
      FinishChange(set, response);
      return;
    default:
      break;
  }
  const std::vector<std::string>& names = response.names;
  std::vector<TensorEntry*>& entries = execute_entries_;  // reused: no allocation per op
  entries.clear();
  for (const std::string& name : names) {
    auto it = pending.find(name);
    entries.push_back(it == pending.end() ? nullptr : &it->second);
    if (timeline_.active() && it != pending.end()) timeline_.End(name);
  }
  std::vector<OpResult> results;
  try {
    results = set.runner().Run(response, entries, reduced);
  } catch (const std::exception& e) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (entries[i]) Complete(set, names[i], Status::Aborted(e.what()), {});
    }
    return;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (entries[i]) Complete(set, names[i], Status::Ok(), std::move(results[i]));
  }
}

// Every rank gets the join response in the same cycle, joined or not; it completes
// every join this rank has waiting (none, on a rank that did not join).
void Engine::FinishJoin(ProcessSet& set, const Response& response) {
  joined_ = false;
  set.runner().set_join_device(-1);
  namer_.StartNewGeneration();
  Status status;
  OpResult result;
  try {
    result = set.runner().Run(response, {}).front();
  } catch (const std::exception& e) {
    status = Status::Aborted(e.what());
  }
  std::vector<TensorEntry> joins;
  joins.swap(set.joins());
  for (TensorEntry& entry : joins) {
    if (timeline_.active()) timeline_.End(entry.request.name);
    handles_.Complete(entry.handle, status, status.ok() ? result : OpResult{});
  }
}

void Engine::Complete(ProcessSet& set, const std::string& name, Status status, OpResult result) {
  auto& pending = set.pending();
  auto it = pending.find(name);
  if (it == pending.end()) return;
  Handle handle = it->second.handle;
  pending.erase(it);
  queue_.Release(set.id(), name);
  handles_.Complete(handle, std::move(status), std::move(result));
}

bool Engine::EveryProcessAlive() const {
  // Twice the peer timeout: a rank that froze or was cut off is named by this engine's
  // own watch for silent peers first, and that names the rank, where the agreement
  // only knows that somebody is missing.
  const double timeout = 2 * config_.peer_timeout_seconds;
  try {
    return world_.every_process_alive(timeout);
  } catch (const Error&) {
    if (!running()) throw Error(stop_reason(), Status::Code::kAborted);
    throw;
  }
}

std::string Engine::stop_reason() const {
  std::lock_guard<std::mutex> lock(stop_mutex_);
  return stop_reason_;
}

void Engine::FailEverything(const std::string& reason) {
  queue_.Close(reason);
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_reason_ = reason;
  }
  running_ = false;
  auto fail = [&](const TensorEntry& entry) {
    // A control entry's name says what it is ("join", "add_process_set([0, 1])").
    const std::string& name = entry.request.name;
    const std::string what =
        IsControl(entry.request.op) ? name : "collective on tensor '" + name + "'";
    handles_.Complete(entry.handle, Status::Aborted(what + " did not run: " + reason), {});
  };
  std::vector<TensorEntry> queued;
  queue_.PopAll(&queued);
  for (TensorEntry& entry : queued) fail(entry);
  for (auto& [id, set] : sets_) {
    for (auto& [name, entry] : set->pending()) fail(entry);
    for (TensorEntry& entry : set->joins()) fail(entry);
    for (TensorEntry& entry : set->changes()) fail(entry);
    set->pending().clear();
    set->joins().clear();
    set->changes().clear();
  }
}

}  // namespace lockstep
