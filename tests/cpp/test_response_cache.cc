// The response cache: matching rules for every op kind, slot assignment, LRU
// eviction, and the determinism that lets every rank keep an identical copy.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "negotiation/response_cache.h"

namespace lockstep {
namespace {

using Lookup = ResponseCache::Lookup;

Response MakeResponse(ResponseType type, const std::string& name, std::vector<int64_t> shape) {
  Response r;
  r.type = type;
  r.names = {name};
  r.shape = std::move(shape);
  r.dtype = DataType::kFloat32;
  return r;
}

Request MakeRequest(OpType op, const std::string& name, std::vector<int64_t> shape) {
  Request r;
  r.op = op;
  r.name = name;
  r.shape = std::move(shape);
  r.dtype = DataType::kFloat32;
  return r;
}

// A cache holding `response`, looked up with `request` from `rank` of `size`.
Lookup FindIn(const Response& response, const Request& request, int rank = 0, int size = 2) {
  ResponseCache cache(4);
  cache.Put(MakeResponse(ResponseType::kAllreduce, "filler", {1}));
  cache.Put(response);
  int32_t id = -1;
  Lookup result = cache.Find(request, rank, size, &id);
  if (result != Lookup::kAbsent) {
    EXPECT_EQ(id, 1);
  }
  return result;
}

Response ScaledReduction(ResponseType type) {
  Response r = MakeResponse(type, "g", {4, 3});
  r.reduce_op = ReduceOp::kSum;
  r.prescale = 0.5;
  r.postscale = 2.0;
  r.device = 1;
  r.group_id = 11;
  r.sizes = {12};
  return r;
}

Request ScaledReductionRequest(OpType op) {
  Request r = MakeRequest(op, "g", {4, 3});
  r.reduce_op = ReduceOp::kSum;
  r.prescale = 0.5;
  r.postscale = 2.0;
  r.device = 1;
  return r;
}

void CheckReduction(ResponseType type, OpType op) {
  Response cached = ScaledReduction(type);
  Request hit = ScaledReductionRequest(op);
  EXPECT_EQ(FindIn(cached, hit), Lookup::kHit);
  hit.group_id = 99;  // groups may change between steps
  hit.group_size = 3;
  EXPECT_EQ(FindIn(cached, hit), Lookup::kHit);

  std::vector<std::function<void(Request&)>> mismatches = {
      [](Request& r) { r.reduce_op = ReduceOp::kMax; },
      [](Request& r) { r.prescale = 0.25; },
      [](Request& r) { r.postscale = 1.0; },
      [](Request& r) {
        r.shape = {4, 4};
      },
      [](Request& r) { r.shape = {12}; },
      [](Request& r) { r.dtype = DataType::kFloat64; },
      [](Request& r) { r.device = -1; },
      [](Request& r) { r.op = OpType::kBroadcast; },
  };
  for (const auto& mutate : mismatches) {
    Request request = ScaledReductionRequest(op);
    mutate(request);
    EXPECT_EQ(FindIn(cached, request), Lookup::kMismatch);
  }
  Request other_name = ScaledReductionRequest(op);
  other_name.name = "h";
  EXPECT_EQ(FindIn(cached, other_name), Lookup::kAbsent);
}

TEST(ResponseCacheMatch, Allreduce) {
  CheckReduction(ResponseType::kAllreduce, OpType::kAllreduce);
}

TEST(ResponseCacheMatch, Reducescatter) {
  CheckReduction(ResponseType::kReducescatter, OpType::kReducescatter);
}

TEST(ResponseCacheMatch, Broadcast) {
  Response cached = MakeResponse(ResponseType::kBroadcast, "w", {2, 5});
  cached.root_rank = 1;
  Request request = MakeRequest(OpType::kBroadcast, "w", {2, 5});
  request.root_rank = 1;
  request.reduce_op = ReduceOp::kMin;  // irrelevant to broadcast
  request.prescale = 3.0;
  EXPECT_EQ(FindIn(cached, request), Lookup::kHit);

  Request other_root = request;
  other_root.root_rank = 0;
  EXPECT_EQ(FindIn(cached, other_root), Lookup::kMismatch);
  Request other_shape = request;
  other_shape.shape = {5, 2};
  EXPECT_EQ(FindIn(cached, other_shape), Lookup::kMismatch);
  Request other_dtype = request;
  other_dtype.dtype = DataType::kInt32;
  EXPECT_EQ(FindIn(cached, other_dtype), Lookup::kMismatch);
  Request as_allreduce = request;
  as_allreduce.op = OpType::kAllreduce;
  EXPECT_EQ(FindIn(cached, as_allreduce), Lookup::kMismatch);
}

TEST(ResponseCacheMatch, AllgatherUsesThisRanksFirstDimension) {
  Response cached = MakeResponse(ResponseType::kAllgather, "x", {3, 4});
  cached.sizes = {3, 5, 2};
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {3, 4}), 0, 3), Lookup::kHit);
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {5, 4}), 1, 3), Lookup::kHit);
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {2, 4}), 2, 3), Lookup::kHit);

  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {3, 4}), 1, 3), Lookup::kMismatch);
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {5, 7}), 1, 3), Lookup::kMismatch);
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {5}), 1, 3), Lookup::kMismatch);
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {}), 1, 3), Lookup::kMismatch);
  // The world changed size: the per-rank sizes no longer describe it.
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "x", {3, 4}), 0, 4), Lookup::kMismatch);
  EXPECT_EQ(FindIn(cached, MakeRequest(OpType::kAllgather, "y", {3, 4}), 0, 3), Lookup::kAbsent);
}

TEST(ResponseCacheMatch, AlltoallUsesThisRanksRowOfTheSplitMatrix) {
  Response cached = MakeResponse(ResponseType::kAlltoall, "t", {4, 3});
  cached.sizes = {2, 2,   // rank 0 sends 2 rows to each
                  1, 3};  // rank 1 sends 1 row to rank 0, 3 to rank 1
  Request equal_split = MakeRequest(OpType::kAlltoall, "t", {4, 3});
  EXPECT_EQ(FindIn(cached, equal_split, 0, 2), Lookup::kHit);
  Request explicit_split = equal_split;
  explicit_split.splits = {2, 2};
  EXPECT_EQ(FindIn(cached, explicit_split, 0, 2), Lookup::kHit);
  Request rank1 = equal_split;
  rank1.splits = {1, 3};
  EXPECT_EQ(FindIn(cached, rank1, 1, 2), Lookup::kHit);

  EXPECT_EQ(FindIn(cached, equal_split, 1, 2), Lookup::kMismatch);
  EXPECT_EQ(FindIn(cached, rank1, 0, 2), Lookup::kMismatch);
  Request indivisible = MakeRequest(OpType::kAlltoall, "t", {5, 3});
  EXPECT_EQ(FindIn(cached, indivisible, 0, 2), Lookup::kMismatch);
  Request other_columns = MakeRequest(OpType::kAlltoall, "t", {4, 2});
  EXPECT_EQ(FindIn(cached, other_columns, 0, 2), Lookup::kMismatch);
  Request too_many_splits = equal_split;
  too_many_splits.splits = {2, 2, 0};
  EXPECT_EQ(FindIn(cached, too_many_splits, 0, 2), Lookup::kMismatch);
  EXPECT_EQ(FindIn(cached, equal_split, 0, 3), Lookup::kMismatch);
}

TEST(ResponseCacheMatch, FusedOrMisnamedResponsesNeverMatch) {
  Response fused = MakeResponse(ResponseType::kAllreduce, "a", {2});
  fused.names = {"a", "b"};
  EXPECT_FALSE(RequestMatchesResponse(MakeRequest(OpType::kAllreduce, "a", {2}), fused, 0, 1));
  Response other = MakeResponse(ResponseType::kAllreduce, "b", {2});
  EXPECT_FALSE(RequestMatchesResponse(MakeRequest(OpType::kAllreduce, "a", {2}), other, 0, 1));
  Response same = MakeResponse(ResponseType::kAllreduce, "a", {2});
  EXPECT_TRUE(RequestMatchesResponse(MakeRequest(OpType::kAllreduce, "a", {2}), same, 0, 1));
  EXPECT_FALSE(RequestMatchesResponse(MakeRequest(OpType::kAllreduce, "a", {2}), same, 1, 1));
}

TEST(ResponseCachePut, RejectsUncacheableResponses) {
  ResponseCache cache(4);
  for (ResponseType type : {ResponseType::kBarrier, ResponseType::kJoin,
                            ResponseType::kProcessSetChange, ResponseType::kError}) {
    EXPECT_THROW(cache.Put(MakeResponse(type, "a", {})), std::invalid_argument);
  }
  Response unnamed = MakeResponse(ResponseType::kAllreduce, "a", {1});
  unnamed.names.clear();
  EXPECT_THROW(cache.Put(unnamed), std::invalid_argument);
  Response fused = MakeResponse(ResponseType::kAllreduce, "a", {1});
  fused.names.push_back("b");
  EXPECT_THROW(cache.Put(fused), std::invalid_argument);
  EXPECT_EQ(cache.size(), 0);
  EXPECT_THROW(ResponseCache(-1), std::invalid_argument);
}

Response Named(const std::string& name) {
  return MakeResponse(ResponseType::kAllreduce, name, {1});
}

TEST(ResponseCacheSlots, LowestFreeSlotIsReused) {
  ResponseCache cache(8);
  for (const char* name : {"a", "b", "c"}) EXPECT_TRUE(cache.Put(Named(name)).empty());
  EXPECT_EQ(cache.IdOf("a"), 0);
  EXPECT_EQ(cache.IdOf("b"), 1);
  EXPECT_EQ(cache.IdOf("c"), 2);
  cache.Erase(1);
  EXPECT_FALSE(cache.Contains(1));
  EXPECT_EQ(cache.IdOf("b"), -1);
  cache.Put(Named("d"));
  EXPECT_EQ(cache.IdOf("d"), 1);
  cache.Erase(2);
  cache.Erase(0);
  cache.Put(Named("e"));
  cache.Put(Named("f"));
  cache.Put(Named("g"));
  EXPECT_EQ(cache.IdOf("e"), 0);
  EXPECT_EQ(cache.IdOf("f"), 2);
  EXPECT_EQ(cache.IdOf("g"), 3);
  EXPECT_EQ(cache.Get(3).names[0], "g");
}

TEST(ResponseCacheSlots, RePutReplacesInPlace) {
  ResponseCache cache(2);
  cache.Put(Named("a"));
  cache.Put(Named("b"));
  Response bigger = MakeResponse(ResponseType::kAllreduce, "a", {7, 7});
  EXPECT_TRUE(cache.Put(bigger).empty());
  EXPECT_EQ(cache.IdOf("a"), 0);
  EXPECT_EQ(cache.Get(0), bigger);
  EXPECT_EQ(cache.size(), 2);
}

TEST(ResponseCacheSlots, EmptySlotsAreReportedNotInvented) {
  ResponseCache cache(2);
  cache.Put(Named("a"));
  EXPECT_THROW(cache.Get(1), std::out_of_range);
  EXPECT_THROW(cache.Get(-1), std::out_of_range);
  EXPECT_THROW(cache.Get(2), std::out_of_range);
  EXPECT_THROW(cache.Touch(1), std::out_of_range);
  EXPECT_FALSE(cache.Contains(5));
  cache.Erase(0);
  EXPECT_NO_THROW(cache.Erase(0));  // a repeated eviction id is harmless
  EXPECT_NO_THROW(cache.Erase(17));
  EXPECT_THROW(cache.Get(0), std::out_of_range);
  int32_t id = 123;
  EXPECT_EQ(cache.Find(MakeRequest(OpType::kAllreduce, "a", {1}), 0, 1, &id), Lookup::kAbsent);
  EXPECT_EQ(id, 123);
}

TEST(ResponseCacheEviction, LeastRecentlyUsedGoesFirst) {
  ResponseCache cache(3);
  cache.Put(Named("a"));  // slot 0
  cache.Put(Named("b"));  // slot 1
  cache.Put(Named("c"));  // slot 2
  cache.Touch(0);         // order now b, c, a
  EXPECT_EQ(cache.Put(Named("d")), std::vector<int32_t>{1});
  EXPECT_EQ(cache.IdOf("d"), 1);
  EXPECT_EQ(cache.IdOf("b"), -1);
  cache.Put(Named("a"));  // re-put counts as a use: order c, d, a
  EXPECT_EQ(cache.Put(Named("e")), std::vector<int32_t>{2});
  EXPECT_EQ(cache.IdOf("e"), 2);
  EXPECT_EQ(cache.Put(Named("f")), std::vector<int32_t>{1});  // d
  EXPECT_EQ(cache.Put(Named("g")), std::vector<int32_t>{0});  // a
  EXPECT_EQ(cache.IdOf("f"), 1);
  EXPECT_EQ(cache.IdOf("g"), 0);
  EXPECT_EQ(cache.size(), 3);
}

TEST(ResponseCacheEviction, MismatchReportsTheSlotToEvict) {
  ResponseCache cache(3);
  cache.Put(Named("a"));
  cache.Put(Named("b"));
  int32_t id = -1;
  EXPECT_EQ(cache.Find(MakeRequest(OpType::kAllreduce, "b", {2}), 0, 1, &id), Lookup::kMismatch);
  EXPECT_EQ(id, 1);
  cache.Erase(id);
  EXPECT_EQ(cache.Find(MakeRequest(OpType::kAllreduce, "b", {2}), 0, 1, &id), Lookup::kAbsent);
}

TEST(ResponseCacheDisabled, CapacityZeroStoresNothing) {
  ResponseCache cache(0);
  EXPECT_FALSE(cache.enabled());
  EXPECT_EQ(cache.capacity(), 0);
  EXPECT_TRUE(cache.Put(Named("a")).empty());
  EXPECT_EQ(cache.IdOf("a"), -1);
  EXPECT_FALSE(cache.Contains(0));
  int32_t id = -1;
  EXPECT_EQ(cache.Find(MakeRequest(OpType::kAllreduce, "a", {1}), 0, 1, &id), Lookup::kAbsent);
  EXPECT_THROW(cache.Put(MakeResponse(ResponseType::kBarrier, "a", {})), std::invalid_argument);
  EXPECT_TRUE(ResponseCache(1).enabled());
}

// Every occupied slot's response, or an empty one for a free slot.
std::vector<Response> Snapshot(const ResponseCache& cache) {
  std::vector<Response> slots;
  for (int32_t id = 0; id < cache.capacity(); ++id) {
    slots.push_back(cache.Contains(id) ? cache.Get(id) : Response{});
  }
  return slots;
}

// Applies one pseudo-random step; both caches get the very same calls.
void RandomStep(std::mt19937& rng, ResponseCache& cache, std::vector<int32_t>* evicted) {
  std::string name = "tensor." + std::to_string(rng() % 24);
  int action = static_cast<int>(rng() % 4);
  if (action <= 1) {
    std::vector<int32_t> out = cache.Put(Named(name));
    evicted->insert(evicted->end(), out.begin(), out.end());
  } else if (action == 2) {
    int32_t id = cache.IdOf(name);
    if (id >= 0) cache.Touch(id);
  } else {
    cache.Erase(static_cast<int32_t>(rng() % 10));
  }
}

TEST(ResponseCacheDeterminism, SameCallsGiveIdenticalSlots) {
  ResponseCache first(10);
  // The second cache lives elsewhere on the heap, so address-dependent decisions
  // would show up as a difference.
  std::vector<std::unique_ptr<std::string>> padding;
  for (int i = 0; i < 100; ++i) padding.push_back(std::make_unique<std::string>(i * 7, 'p'));
  auto second = std::make_unique<ResponseCache>(10);

  std::mt19937 rng_first(2024), rng_second(2024);
  std::vector<int32_t> evicted_first, evicted_second;
  for (int step = 0; step < 3000; ++step) {
    RandomStep(rng_first, first, &evicted_first);
    RandomStep(rng_second, *second, &evicted_second);
    ASSERT_EQ(Snapshot(first), Snapshot(*second)) << "step " << step;
  }
  EXPECT_EQ(evicted_first, evicted_second);
  EXPECT_FALSE(evicted_first.empty());  // the run did exercise eviction
}

}  // namespace
}  // namespace lockstep
