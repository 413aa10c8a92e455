#include "negotiation/controller.h"

#include <cstring>

#include "wire/cycle_bits.h"

namespace lockstep {
namespace {

static_assert(kMaxNegotiationPayloadBytes == kMaxLanePayloadBytes,
              "the setting's bound and the lane's must agree");

// Whether a cached response may ride in a lane of `lane_bytes`, data aside: a lone
// allreduce in host memory (GPU tensors never: their data is on the device), with a
// plain reduce op (Adasum never), of 1 to lane_bytes bytes.
bool CanRide(const Response& r, int lane_bytes) {
  return r.type == ResponseType::kAllreduce && r.device < 0 && r.names.size() == 1 &&
         r.sizes.size() == 1 && r.reduce_op != ReduceOp::kAdasum && r.sizes[0] >= 1 &&
         r.sizes[0] * static_cast<int64_t>(DataTypeSize(r.dtype)) <= lane_bytes &&
         (r.dtype != DataType::kBool || r.prescale == 1.0);
}

LaneHeader HeaderFor(int32_t slot, const Response& r) {
  LaneHeader header;
  header.slot = slot;
  header.dtype = r.dtype;
  header.reduce_op = r.reduce_op;
  header.count = static_cast<int32_t>(r.sizes[0]);
  return header;
}

bool TestBit(const std::vector<uint64_t>& words, int32_t id) {
  return (words[id / 64] >> (id % 64)) & 1u;
}

// Visits set bits only: the vectors span the whole cache (1024 slots by default) but
// a cycle rarely has more than a few bits set, and this runs every cycle.
template <typename Visit>
void ForEachSetBit(const std::vector<uint64_t>& words, Visit visit) {
  for (size_t w = 0; w < words.size(); ++w) {
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      visit(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
    }
  }
}

}  // namespace

Controller::Controller(std::unique_ptr<Exchange> exchange, const Topology& topology,
                       const Config& config, const Logger& logger)
    : topology_(topology),
      logger_(logger),
      exchange_(std::move(exchange)),
      cache_(config.cache_capacity),
      stall_inspector_(config, logger),
      lane_bytes_(LaneBytes(config)) {
  if (topology_.rank == 0) {
    coordinator_ = std::make_unique<Coordinator>(topology_.size, stall_inspector_);
  }
}

int Controller::LaneBytes(const Config& config) {
  return config.cache_capacity > 0 ? config.negotiation_payload_bytes : 0;
}

int32_t Controller::CacheHit(const Request& request) const {
  const bool cacheable = !IsControl(request.op) && request.op != OpType::kBarrier;
  int32_t id = -1;
  if (!cacheable || !cache_.enabled() || cache_paused_) return -1;
  return cache_.Find(request, topology_.rank, topology_.size, &id) == ResponseCache::Lookup::kHit
             ? id
             : -1;
}

void Controller::Admit(std::vector<Request>* batch) {
  std::map<int64_t, bool> group_all_hit;  // group id -> every member is a cache hit
  for (const Request& request : *batch) {
    if (request.group_id == 0) continue;
    auto [it, inserted] = group_all_hit.try_emplace(request.group_id, true);
    it->second = it->second && CacheHit(request) >= 0;
  }
  for (Request& request : *batch) {
    const int32_t id = CacheHit(request);
    const bool as_cached = id >= 0 && (request.group_id == 0 || group_all_hit[request.group_id]);
    if (as_cached) {
      cached_pending_[id] = std::move(request);
    } else {
      unsent_.push_back(std::move(request));
    }
  }
}

NegotiationResult Controller::Negotiate(bool shutdown_requested, bool joined, bool has_pending,
                                        bool caller_blocked) {
  const WaitMode mode = !has_pending     ? WaitMode::kIdle
                        : caller_blocked ? WaitMode::kCaller
                                         : WaitMode::kPending;
  Flags flags = ExchangeBits(shutdown_requested, joined, has_pending, mode);
  const std::vector<uint64_t>& ready = cycle_summary_.bits.ready;
  const std::vector<uint64_t>& partial = cycle_summary_.bits.partial;
  NegotiationResult result;
  result.all_ranks_waiting = flags.all_pending;
  result.any_rank_waiting = flags.any_pending;
  if (flags.shutdown) {
    result.shutdown = true;
    return result;
  }
  TakeReadyFromCache(ready, &result);
  result.cached_responses =
      static_cast<int>(result.responses.size()) + (result.ridden != nullptr ? 1 : 0);
  TrackPartial(partial);
  cache_paused_ = flags.any_joined;
  if (flags.any_joined) {  // joined ranks set no bits: go through the coordinator
    for (auto& [id, request] : cached_pending_) unsent_.push_back(std::move(request));
    cached_pending_.clear();
  }
  if (flags.need_full_round) {
    result.full_round = true;
    ResponseList list = FullRound();
    ApplyCacheUpdates(list);
    for (Response& response : list.responses) result.responses.push_back(std::move(response));
  }
  return result;
}

Controller::Flags Controller::ExchangeBits(bool shutdown_requested, bool joined, bool has_pending,
                                           WaitMode mode) {
  CycleBitsLocal& local = local_bits_;
  local.has_pending = has_pending;
  const bool stall_check_due = StallCheckDue();  // always asked: it keeps its own clock
  local.need_full_round = !unsent_.empty() || stall_check_due;
  local.shutdown = shutdown_requested;
  local.joined = joined;
  local.ready_slots.clear();
  if (!joined) {
    for (const auto& [id, request] : cached_pending_) local.ready_slots.push_back(id);
  }
  ridden_slot_ = -1;
  std::vector<uint64_t>& vec = cycle_vector_;
  if (lane_bytes_ > 0) {
    LaneHeader header;
    const bool carry = FillLane(joined, &header);
    EncodeCycleVectorInto(cache_.capacity(), local, lane_bytes_, carry ? &header : nullptr,
                          lane_payload_.data(), &vec);
    exchange_->CombineAcrossRanks(&vec, mode);
    DecodeCycleVectorInto(vec, cache_.capacity(), lane_bytes_, &cycle_summary_);
    DecideRide(cycle_summary_, cycle_summary_.bits.ready);
  } else {
    vec.assign(CycleBitsWords(cache_.capacity()), 0);
    EncodeCycleBitsInto(cache_.capacity(), local, vec.data());
    exchange_->AndAcrossRanks(&vec, mode);
    DecodeCycleBitsInto(vec.data(), vec.size(), cache_.capacity(), &cycle_summary_.bits);
  }
  const CycleBitsSummary& summary = cycle_summary_.bits;
  return Flags{summary.all_pending, summary.any_pending, summary.need_full_round, summary.shutdown,
               summary.any_joined};
}

// A rank carries a tensor in the lane only while it is the one cached tensor this rank
// has waiting: then, if every rank carries it, it is also the only cached response of
// the cycle, so riding saves its whole data collective; with several ready they share
// a fused collective anyway, which riding would not save. The lane source writes this
// rank's contribution (and may refuse: see LaneSource::Fill); a rank that carries
// nothing leaves its lane empty, which empties the lane everywhere.
bool Controller::FillLane(bool joined, LaneHeader* header) {
  if (joined || cache_paused_ || cached_pending_.size() != 1 || lane_source_ == nullptr) {
    return false;
  }
  const auto& [id, request] = *cached_pending_.begin();
  const Response& response = cache_.Get(id);
  if (!CanRide(response, lane_bytes_)) return false;
  if (!lane_source_->Fill(response, request.name, lane_payload_.data())) return false;
  *header = HeaderFor(id, response);
  return true;
}

// Rides when every rank carried the same tensor (the lane survived the reduction) and
// its bit is set everywhere. The reduced vector is the same on every rank, and so is
// the cache, so every rank decides alike.
void Controller::DecideRide(const CycleVectorSummary& summary, const std::vector<uint64_t>& ready) {
  if (!summary.lane_valid) return;
  const LaneHeader& lane = summary.lane;
  if (!TestBit(ready, lane.slot) || !cache_.Contains(lane.slot)) return;
  const Response& response = cache_.Get(lane.slot);
  if (!CanRide(response, lane_bytes_) || !(HeaderFor(lane.slot, response) == lane)) return;
  ridden_slot_ = lane.slot;
  std::memcpy(ridden_payload_.data(), summary.payload.data(),
              static_cast<size_t>(lane.count) * DataTypeSize(lane.dtype));
}

void Controller::TakeReadyFromCache(const std::vector<uint64_t>& ready, NegotiationResult* result) {
  std::vector<Response>* out = &result->responses;
  ForEachSetBit(ready, [&](int32_t id) {
    if (id == ridden_slot_) {
      ridden_response_ = cache_.Get(id);
      result->ridden = &ridden_response_;
      result->ridden_payload = ridden_payload_;
    } else {
      out->push_back(cache_.Get(id));
    }
    cache_.Touch(id);
    cached_pending_.erase(id);
  });
}

void Controller::TrackPartial(const std::vector<uint64_t>& partial) {
  if (topology_.rank != 0) return;
  const auto now = Clock::now();
  for (auto it = partial_since_.begin(); it != partial_since_.end();) {
    it = TestBit(partial, it->first) ? std::next(it) : partial_since_.erase(it);
  }
  ForEachSetBit(partial, [&](int32_t id) { partial_since_.try_emplace(id, now); });
}

bool Controller::StallCheckDue() {
  if (topology_.rank != 0) return false;
  const auto now = Clock::now();
  double oldest = coordinator_->OldestWaitSeconds(now);
  for (const auto& [id, since] : partial_since_) {
    oldest = std::max(oldest, std::chrono::duration<double>(now - since).count());
  }
  return stall_inspector_.Due(oldest, now);
}

ResponseList Controller::FullRound() {
  RequestList mine;
  mine.requests = std::move(unsent_);
  unsent_.clear();
  for (const auto& [id, request] : cached_pending_) mine.pending_cache_ids.push_back(id);
  std::vector<uint8_t> bytes = SerializeRequestList(mine);

  std::vector<std::vector<uint8_t>> gathered = exchange_->GatherAtRoot(std::move(bytes));
  std::vector<uint8_t> reply;
  if (topology_.rank == 0) {
    std::vector<RequestList> lists;
    for (const auto& list : gathered) lists.push_back(ParseRequestList(list.data(), list.size()));
    reply =
        SerializeResponseList(coordinator_->Process(lists, cache_, partial_since_, Clock::now()));
  }
  reply = exchange_->BroadcastFromRoot(std::move(reply));
  return ParseResponseList(reply.data(), reply.size());
}

void Controller::ApplyCacheUpdates(const ResponseList& list) {
  for (int32_t id : list.evict_cache_ids) {
    ResendInFull(id);
    cache_.Erase(id);
  }
  for (const Response& response : list.responses) {
    if (response.type == ResponseType::kError) {
      // A stalled cached tensor was cancelled: stop waiting on its bit, and restart
      // its stall clock so a resubmission gets the full time again.
      for (auto it = cached_pending_.begin(); it != cached_pending_.end();) {
        it = it->second.name == response.names.front() ? cached_pending_.erase(it) : std::next(it);
      }
      partial_since_.erase(cache_.IdOf(response.names.front()));
      continue;
    }
    if (!cache_.enabled() || response.type == ResponseType::kBarrier || IsControl(response.type)) {
      continue;
    }
    for (int32_t evicted : cache_.Put(response)) ResendInFull(evicted);
  }
}

void Controller::ResendInFull(int32_t cache_id) {
  auto it = cached_pending_.find(cache_id);
  if (it == cached_pending_.end()) return;
  unsent_.push_back(std::move(it->second));
  cached_pending_.erase(it);
}

}  // namespace lockstep
