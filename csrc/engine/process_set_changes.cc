// Adding and removing process sets at run time. A change is a control message of its
// own type over the global set: every rank sends its proposal, the coordinator matches
// the ranks' proposals in the order each rank made them and answers with the agreed
// change (or an error, when they disagree). That response runs at the same point of
// the same cycle on every rank, where each background thread applies the change,
// creating or freeing the set's communicator. Ids therefore agree everywhere, and the
// sets' own cycles, which run after the global one, see the change on all members at
// once.
#include <cstring>

#include "engine/engine.h"
#include "submit/spec_validation.h"

namespace lockstep {
namespace {

Status ChangeFailure(const Error& e) {
  if (e.code() == Status::Code::kInvalidArgument) return Status::InvalidArgument(e.what());
  return Status::Precondition(e.what());
}

}  // namespace

int32_t Engine::AddProcessSet(std::vector<int> ranks) {
  ProcessSetChange change;
  change.kind = ProcessSetChange::Kind::kAdd;
  change.ranks = NormalizeRanks(std::move(ranks), topology().size);
  return ProposeChange(change);
}

void Engine::RemoveProcessSet(int32_t id) {
  table_.RanksOrThrow(id);
  if (id == 0) {
    throw Error("the global process set (id 0) cannot be removed", Status::Code::kInvalidArgument);
  }
  ProcessSetChange change;
  change.kind = ProcessSetChange::Kind::kRemove;
  change.id = id;
  ProposeChange(change);
}

int32_t Engine::ProposeChange(const ProcessSetChange& change) {
  TensorEntry entry;
  entry.spec.op = OpType::kProcessSetChange;
  // For messages and the timeline only: changes are keyed by their type, not by a name.
  entry.spec.name = DescribeChange(change);
  entry.request = RequestFromSpec(entry.spec, topology().rank);
  entry.request.change = EncodeChange(change);
  entry.enqueued_at = std::chrono::steady_clock::now();
  entry.handle = handles_.Allocate();
  const Handle handle = entry.handle;
  // The proposer never runs cycles (applying a change is the loop's): it waits.
  Submit(&entry, 1, driver_.WakeLoopOnSubmit(/*submitter_claims=*/false));
  OpResult result = handles_.Wait(handle);
  int32_t id = 0;
  std::memcpy(&id, result.buffer->data(), sizeof(id));
  return id;
}

// Each rank's proposals reach the coordinator in the order they were made, and are
// answered in that order, so a change response answers this rank's oldest waiting
// proposal. A rank that made none (it had joined, or its absence stalled the change)
// has none waiting either: every proposal goes out in the cycle that admits it.
void Engine::FinishChange(ProcessSet& set, const Response& response) {
  Status status;
  OpResult outcome;
  if (!response.error_message.empty()) {
    status = Status::Precondition(response.error_message);
  } else {
    // Applied on every rank, whether or not it has a caller waiting: it is collective.
    try {
      outcome = ApplyChange(DecodeChange(response.change));
    } catch (const Error& e) {
      status = ChangeFailure(e);
    }
  }
  auto& changes = set.changes();
  if (changes.empty()) return;
  TensorEntry entry = std::move(changes.front());
  changes.pop_front();
  if (timeline_.active()) timeline_.End(entry.request.name);
  handles_.Complete(entry.handle, status, status.ok() ? std::move(outcome) : OpResult{});
}

OpResult Engine::ApplyChange(const ProcessSetChange& change) {
  int32_t id = change.id;
  if (change.kind == ProcessSetChange::Kind::kAdd) {
    id = table_.Add(change.ranks);
    CreateSet(id, change.ranks);
  } else {
    table_.Remove(change.id);
    DropSet(change.id);
  }
  OpResult result;
  result.shape = {1};
  result.buffer = std::make_shared<Buffer>(sizeof(int32_t));
  std::memcpy(result.buffer->data(), &id, sizeof(id));
  return result;
}

// Every rank calls the split, members and others alike: it is collective over the
// global communicator, and every rank is at this same point of the same cycle.
void Engine::CreateSet(int32_t id, const std::vector<int>& ranks) {
  const Topology set_topology = SetTopology(ranks, topology().rank);
  const bool member = set_topology.rank >= 0;
  std::shared_ptr<Communicator> comm;
  try {
    comm = world_.communicator->Split(member);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " while creating process set " + std::to_string(id));
  }
  if (!member) return;
  sets_[id] =
      std::make_unique<ProcessSet>(id, std::move(comm), ranks, set_topology, config_, logger_,
                                   timeline_, IdleWait(), world_.hostnames, call_clock_);
}

void Engine::DropSet(int32_t id) {
  auto it = sets_.find(id);
  if (it == sets_.end()) return;  // not a member
  for (auto& [name, entry] : it->second->pending()) {
    queue_.Release(id, name);
    handles_.Complete(entry.handle,
                      Status::InvalidArgument("process set " + std::to_string(id) +
                                              " was removed while '" + name + "' was pending"),
                      {});
  }
  sets_.erase(it);
}

}  // namespace lockstep
