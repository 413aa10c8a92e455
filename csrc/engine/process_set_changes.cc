// Adding and removing process sets at run time. A change rides on an ordinary
// allgather over the global set: every rank contributes its proposal, and when the
// allgather's response runs (the same point of the same cycle on every rank) each
// background thread checks that all proposals agree and applies the change, creating
// or freeing the set's communicator. Ids therefore agree everywhere, and the sets'
// own cycles, which run after the global one, see the change on all members at once.
#include <cstring>

#include "engine/engine.h"

namespace lockstep {
namespace {

constexpr char kChangePrefix[] = "__lockstep_process_set_change__.";

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
  std::vector<int32_t> words = EncodeChange(change);
  OpSpec spec;
  spec.op = OpType::kAllgather;
  spec.name = kChangePrefix + std::to_string(changes_proposed_++);
  spec.dtype = DataType::kInt32;
  spec.shape = {static_cast<int64_t>(words.size())};
  spec.input = words.data();  // alive until Wait returns
  std::vector<OpSpec> one;
  one.push_back(std::move(spec));
  OpResult result = handles_.Wait(Enqueue(std::move(one), /*grouped=*/false).front());
  int32_t id = 0;
  std::memcpy(&id, result.buffer->data(), sizeof(id));
  return id;
}

bool Engine::IsChangeOp(const ProcessSet& set, const std::string& name) {
  return set.id() == 0 && name.compare(0, sizeof(kChangePrefix) - 1, kChangePrefix) == 0;
}

void Engine::ApplyChange(const OpResult& gathered, OpResult* result) {
  const auto* words = static_cast<const int32_t*>(gathered.buffer->data());
  const ProcessSetChange change =
      AgreedChange(words, gathered.buffer->size() / sizeof(int32_t), topology().size);
  int32_t id = change.id;
  if (change.kind == ProcessSetChange::Kind::kAdd) {
    id = table_.Add(change.ranks);
    CreateSet(id, change.ranks);
  } else {
    table_.Remove(change.id);
    DropSet(change.id);
  }
  result->shape = {1};
  result->buffer = std::make_shared<Buffer>(sizeof(int32_t));
  std::memcpy(result->buffer->data(), &id, sizeof(id));
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
