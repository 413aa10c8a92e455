// One process set as the background thread runs it: its communicator, backend,
// negotiation (controller, with its own response cache, coordinator and stall
// inspector), op runner and the ops pending in it: tensors by name, control entries
// (join, process-set changes) by type, apart, so no tensor name can reach them. The engine holds
// one per set this rank belongs to, the global set (id 0) included, and runs a cycle of each in id
// order, so ranks meet in every set's collectives in the same order.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/communicator.h"
#include "engine/op_runner.h"
#include "engine/timeline.h"
#include "negotiation/controller.h"
#include "submit/tensor_queue.h"

namespace lockstep {

class ProcessSet {
 public:
  // `comm`: the set's ranks (for the global set, id 0, the engine's world).
  // `hostnames`: every global rank's host, for messages about unresponsive peers.
  // `clock`: where the backend marks its blocking calls, for the engine's watchdog.
  ProcessSet(int32_t id, std::shared_ptr<Communicator> comm, std::vector<int> ranks,
             const Topology& topology, const Config& config, const Logger& logger,
             Timeline& timeline, IdleWait idle_wait, const std::vector<std::string>& hostnames,
             CallClock& clock);
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  int32_t id() const { return id_; }
  const std::vector<int>& ranks() const { return ranks_; }  // global ranks, ascending
  // Appended to messages that number ranks within the set; empty for the global set.
  std::string Scope() const;
  const Topology& topology() const { return topology_; }
  bool shm_active() const { return backend_->shm_active(); }
  Backend& backend() { return *backend_; }
  Controller& controller() { return controller_; }
  OpRunner& runner() { return runner_; }
  std::unordered_map<std::string, TensorEntry>& pending() { return pending_; }
  // Joins waiting for the join response, which completes them all.
  std::vector<TensorEntry>& joins() { return joins_; }
  // Process-set changes (global set only), in the order they were proposed: each
  // change response answers the oldest.
  std::deque<TensorEntry>& changes() { return changes_; }
  bool HasPending() const { return !pending_.empty() || !joins_.empty() || !changes_.empty(); }

 private:
  int32_t id_;
  std::shared_ptr<Communicator> comm_;  // first: everything below uses it
  std::vector<int> ranks_;
  Topology topology_;
  std::unique_ptr<Backend> backend_;
  Controller controller_;
  OpRunner runner_;
  std::unordered_map<std::string, TensorEntry> pending_;
  std::vector<TensorEntry> joins_;
  std::deque<TensorEntry> changes_;
};

}  // namespace lockstep
