// Negotiation as every rank runs it, once per cycle: a bit-vector allreduce that
// settles cached tensors and global flags, and, when needed, a full round through the
// coordinator on rank 0. Keeps the response cache identical on all ranks.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "common/config.h"
#include "common/logging.h"
#include "lockstep/values.h"
#include "negotiation/coordinator.h"
#include "negotiation/exchange.h"
#include "negotiation/lane_source.h"
#include "negotiation/response_cache.h"
#include "negotiation/stall_inspector.h"
#include "wire/cycle_lane.h"
#include "wire/message.h"

namespace lockstep {

struct NegotiationResult {
  std::vector<Response> responses;  // the same list, in the same order, on every rank
  bool shutdown = false;            // some rank asked to shut down
  bool all_ranks_waiting = false;   // every rank had unfinished work when the cycle began
  bool any_rank_waiting = false;    // some rank had unfinished work when the cycle began
  int cached_responses = 0;         // how many responses came from the cache, ridden included
  bool full_round = false;          // the cycle went through the coordinator
  // An allreduce whose data rode with the bits, or null; never also in `responses`. Its
  // reduction is done (ridden_payload, bytes the controller passes on unread: every
  // rank's prescaled contribution combined, before postscale and Average's division)
  // and it needs no data collective. It points into the controller: valid until the
  // controller's next Negotiate.
  const Response* ridden = nullptr;
  std::array<uint8_t, kMaxLanePayloadBytes> ridden_payload{};
};

class Controller {
 public:
  using Clock = std::chrono::steady_clock;
  // Sleeps up to the given time, returning true early when local work (or a wake-up)
  // arrives: how the exchange waits for other ranks while its own rank is idle.
  using IdleWait = Exchange::IdleWait;

  // `exchange` carries the cycle's messages among the set's ranks (topology.size of
  // them); its AND vectors are CycleBitsWords(config.cache_capacity) long, and with
  // config.negotiation_payload_bytes > 0 it combines CycleVectorWords(...) instead.
  Controller(std::unique_ptr<Exchange> exchange, const Topology& topology, const Config& config,
             const Logger& logger);

  // Files new local requests for the next cycle: one cache bit each when the cache
  // knows them exactly, otherwise full requests. A group goes one way as a whole, so
  // the coordinator always sees all of its members or none.
  void Admit(std::vector<Request> batch) { Admit(&batch); }
  // The same, moving the requests out of *batch (which keeps its capacity).
  void Admit(std::vector<Request>* batch);
  // `caller_blocked`: a caller's thread runs this cycle for its own synchronous op
  // (see WaitMode::kCaller).
  NegotiationResult Negotiate(bool shutdown_requested, bool joined, bool has_pending,
                              bool caller_blocked = false);
  bool HasUnsent() const { return !unsent_.empty(); }
  // The payload lane's size for `config`: none without a response cache.
  static int LaneBytes(const Config& config);
  // Appended to stall warnings (ranks here are the communicator's, 0..size-1).
  void SetScope(const std::string& scope) { stall_inspector_.set_scope(scope); }
  // Where the data of a lone small cached allreduce comes from, to ride with the bits
  // (FillLane); without it, nothing rides. Not owned; outlives the controller's cycles.
  void SetLaneSource(LaneSource* source) { lane_source_ = source; }

 private:
  struct Flags {
    bool all_pending, any_pending, need_full_round, shutdown, any_joined;
  };
  // Leaves the reduced bits in cycle_summary_.bits.
  Flags ExchangeBits(bool shutdown_requested, bool joined, bool has_pending, WaitMode mode);
  // The payload lane: which tensor rides is decided here, from cached responses; its
  // data comes from lane_source_.
  bool FillLane(bool joined, LaneHeader* header);
  void DecideRide(const CycleVectorSummary& summary, const std::vector<uint64_t>& ready);
  void TakeReadyFromCache(const std::vector<uint64_t>& ready, NegotiationResult* out);
  void TrackPartial(const std::vector<uint64_t>& partial);
  ResponseList FullRound();
  void ApplyCacheUpdates(const ResponseList& list);
  void ResendInFull(int32_t cache_id);
  bool StallCheckDue();
  int32_t CacheHit(const Request& request) const;  // slot id, or -1

  Topology topology_;
  const Logger& logger_;
  std::unique_ptr<Exchange> exchange_;  // every message between ranks, bounded in time
  ResponseCache cache_;
  StallInspector stall_inspector_;
  std::unique_ptr<Coordinator> coordinator_;   // rank 0 only
  std::map<int32_t, Request> cached_pending_;  // cache slot -> request waiting on its bit
  std::vector<Request> unsent_;
  std::map<int32_t, Clock::time_point> partial_since_;  // rank 0: slots pending somewhere
  bool cache_paused_ = false;  // while a rank has joined, everything goes in full
  int lane_bytes_ = 0;         // config.negotiation_payload_bytes
  LaneSource* lane_source_ = nullptr;
  std::array<uint64_t, kMaxLanePayloadBytes / 8> lane_payload_{};  // what this rank carries
  // This cycle's riding slot (-1: none) and its combined payload, the same on every rank.
  int32_t ridden_slot_ = -1;
  std::array<uint8_t, kMaxLanePayloadBytes> ridden_payload_{};
  // The riding response, assigned from the cache rather than copied anew, so that a
  // steady stream of small ops allocates nothing for it.
  Response ridden_response_;
  // Each cycle's vectors, reused: a cycle allocates nothing for its bits.
  CycleBitsLocal local_bits_;
  std::vector<uint64_t> cycle_vector_;
  CycleVectorSummary cycle_summary_;
};

}  // namespace lockstep
