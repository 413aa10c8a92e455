// Tensor fusion planning (which allreduces share a buffer, in what order) and the
// grow-only buffer that holds them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "fusion/fusion_buffer.h"

namespace lockstep {
namespace {

Response Allreduce(const std::string& name, int64_t elements, DataType dtype = DataType::kFloat32) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.dtype = dtype;
  r.reduce_op = ReduceOp::kSum;
  r.names = {name};
  r.sizes = {elements};
  r.shape = {elements};
  return r;
}

Response OfType(ResponseType type, const std::string& name, int64_t elements) {
  Response r = Allreduce(name, elements);
  r.type = type;
  return r;
}

std::vector<std::vector<std::string>> NamesOf(const std::vector<Response>& responses) {
  std::vector<std::vector<std::string>> names;
  for (const Response& r : responses) names.push_back(r.names);
  return names;
}

using Names = std::vector<std::vector<std::string>>;

TEST(ResponseBytesTest, SumsSizesTimesElementSize) {
  Response r = Allreduce("a", 3, DataType::kFloat16);
  r.sizes = {3, 5};
  EXPECT_EQ(ResponseBytes(r), 16);
  r.dtype = DataType::kFloat64;
  EXPECT_EQ(ResponseBytes(r), 64);
  r.sizes.clear();
  EXPECT_EQ(ResponseBytes(r), 0);
}

TEST(PlanFusionTest, MergesCompatibleAllreducesInOrderUpToThreshold) {
  // 16 bytes each; 40 bytes hold two of them but not three.
  std::vector<Response> planned =
      PlanFusion({Allreduce("a", 4), Allreduce("b", 4), Allreduce("c", 4), Allreduce("d", 4)}, 40);
  ASSERT_EQ(planned.size(), 2u);
  EXPECT_EQ(planned[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(planned[0].sizes, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(planned[1].names, (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(planned[1].sizes, (std::vector<int64_t>{4, 4}));
  for (const Response& r : planned) {
    EXPECT_EQ(r.type, ResponseType::kAllreduce);
    EXPECT_EQ(r.dtype, DataType::kFloat32);
    EXPECT_EQ(r.reduce_op, ReduceOp::kSum);
  }
}

TEST(PlanFusionTest, FillsABinExactlyToTheThreshold) {
  std::vector<Response> planned =
      PlanFusion({Allreduce("a", 4), Allreduce("b", 4), Allreduce("c", 4)}, 48);
  ASSERT_EQ(planned.size(), 1u);
  EXPECT_EQ(planned[0].names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ResponseBytes(planned[0]), 48);
}

TEST(PlanFusionTest, ResponseAtOrOverThresholdStaysAlone) {
  // "at" is exactly 16 bytes, "over" 20: neither joins the small ones around them.
  std::vector<Response> planned = PlanFusion(
      {Allreduce("x", 2), Allreduce("at", 4), Allreduce("over", 5), Allreduce("y", 2)}, 16);
  EXPECT_EQ(NamesOf(planned), (Names{{"x", "y"}, {"at"}, {"over"}}));
  EXPECT_EQ(planned[1].sizes, (std::vector<int64_t>{4}));
  EXPECT_EQ(planned[2].sizes, (std::vector<int64_t>{5}));

  planned = PlanFusion({Allreduce("at1", 4), Allreduce("at2", 4)}, 16);
  EXPECT_EQ(NamesOf(planned), (Names{{"at1"}, {"at2"}}));
}

TEST(PlanFusionTest, TensorAtOrOverStandaloneBytesStaysAlone) {
  // 8, 16, 20 and 8 bytes; the threshold would hold them all.
  const std::vector<Response> input = {Allreduce("x", 2), Allreduce("s", 4), Allreduce("big", 5),
                                       Allreduce("y", 2)};
  EXPECT_EQ(NamesOf(PlanFusion(input, 1024, 16)), (Names{{"x", "y"}, {"s"}, {"big"}}));
  EXPECT_EQ(NamesOf(PlanFusion(input, 1024, 17)), (Names{{"x", "s", "y"}, {"big"}}));
  // Zero or negative: no standalone limit.
  EXPECT_EQ(NamesOf(PlanFusion(input, 1024, 0)), (Names{{"x", "s", "big", "y"}}));
  EXPECT_EQ(NamesOf(PlanFusion(input, 1024, -1)), (Names{{"x", "s", "big", "y"}}));
  EXPECT_EQ(NamesOf(PlanFusion(input, 1024)), (Names{{"x", "s", "big", "y"}}));
}

TEST(PlanFusionTest, FullBinIsClosedAndLaterTensorsFillTheNewOne) {
  // b does not fit next to a, so it opens a new bin; c then fits only beside b.
  std::vector<Response> planned =
      PlanFusion({Allreduce("a", 4), Allreduce("b", 8), Allreduce("c", 2)}, 40);
  EXPECT_EQ(NamesOf(planned), (Names{{"a"}, {"b", "c"}}));
}

TEST(PlanFusionTest, NeverMergesDifferentParameters) {
  using Mutation = void (*)(Response&);
  const std::vector<std::tuple<const char*, Mutation>> mutations = {
      {"dtype", [](Response& r) { r.dtype = DataType::kInt32; }},
      {"reduce op", [](Response& r) { r.reduce_op = ReduceOp::kMax; }},
      {"prescale", [](Response& r) { r.prescale = 0.5; }},
      {"postscale", [](Response& r) { r.postscale = 2.0; }},
      {"device", [](Response& r) { r.device = 0; }},
  };
  for (const auto& [what, mutate] : mutations) {
    SCOPED_TRACE(what);
    Response other = Allreduce("b", 4);
    mutate(other);
    std::vector<Response> planned = PlanFusion({Allreduce("a", 4), other}, 1 << 20);
    ASSERT_EQ(planned.size(), 2u);
    EXPECT_EQ(planned[0], Allreduce("a", 4));
    EXPECT_EQ(planned[1], other);
  }
}

TEST(PlanFusionTest, InterleavedKindsFuseWithinTheirOwnKind) {
  std::vector<Response> planned =
      PlanFusion({Allreduce("a32", 2), Allreduce("a64", 2, DataType::kFloat64), Allreduce("b32", 2),
                  Allreduce("b64", 2, DataType::kFloat64)},
                 1024);
  ASSERT_EQ(NamesOf(planned), (Names{{"a32", "b32"}, {"a64", "b64"}}));
  EXPECT_EQ(planned[0].dtype, DataType::kFloat32);
  EXPECT_EQ(planned[1].dtype, DataType::kFloat64);
}

TEST(PlanFusionTest, OtherResponsesKeepTheirRelativeOrder) {
  std::vector<Response> planned = PlanFusion(
      {OfType(ResponseType::kAllgather, "g1", 1), Allreduce("a", 1),
       OfType(ResponseType::kBroadcast, "b1", 1), Allreduce("c", 1),
       OfType(ResponseType::kAllgather, "g2", 1), OfType(ResponseType::kError, "e", 1),
       OfType(ResponseType::kReducescatter, "r", 1), OfType(ResponseType::kAlltoall, "t", 1),
       OfType(ResponseType::kBarrier, "barrier", 0), Allreduce("d", 1)},
      1024);
  EXPECT_EQ(NamesOf(planned),
            (Names{{"g1"}, {"a", "c", "d"}, {"b1"}, {"g2"}, {"e"}, {"r"}, {"t"}, {"barrier"}}));
  EXPECT_EQ(planned[0].type, ResponseType::kAllgather);
  EXPECT_EQ(planned[2].type, ResponseType::kBroadcast);
  EXPECT_EQ(planned[4].type, ResponseType::kError);
}

TEST(PlanFusionTest, ThresholdZeroOrNegativeDisablesFusion) {
  const std::vector<Response> input = {Allreduce("a", 1), Allreduce("b", 1), Allreduce("c", 1)};
  EXPECT_EQ(PlanFusion(input, 0), input);
  EXPECT_EQ(PlanFusion(input, -1), input);
}

// A fixed pseudo-random mix of kinds and sizes.
std::vector<Response> RandomResponses(unsigned seed, int count) {
  std::mt19937 rng(seed);
  std::vector<Response> responses;
  for (int i = 0; i < count; ++i) {
    Response r = Allreduce("t" + std::to_string(i), 1 + static_cast<int64_t>(rng() % 64),
                           rng() % 2 ? DataType::kFloat32 : DataType::kFloat16);
    if (rng() % 5 == 0) r.type = ResponseType::kAllgather;
    if (rng() % 3 == 0) r.reduce_op = ReduceOp::kAverage;
    responses.push_back(r);
  }
  return responses;
}

using Key = std::tuple<DataType, ReduceOp>;

bool Fusable(const Response& r, int64_t threshold) {
  return r.type == ResponseType::kAllreduce && ResponseBytes(r) < threshold;
}

TEST(PlanFusionTest, DeterministicAndPreservesEveryTensor) {
  const int64_t threshold = 128;
  const std::vector<Response> input = RandomResponses(7, 300);
  const std::vector<Response> planned = PlanFusion(input, threshold);
  EXPECT_EQ(planned, PlanFusion(input, threshold));
  EXPECT_LT(planned.size(), input.size());

  // Unfusable responses come out unchanged and in their relative order; fusable ones
  // come out, per kind, in submission order (a large tensor may run after small ones
  // submitted later, which joined an earlier bin); none is lost or repeated, and no
  // fused response exceeds the threshold.
  std::vector<Response> alone_before, alone_after;
  std::map<Key, std::vector<std::string>> fused_before, fused_after;
  for (const Response& r : input) {
    if (Fusable(r, threshold)) {
      fused_before[Key(r.dtype, r.reduce_op)].push_back(r.names[0]);
    } else {
      alone_before.push_back(r);
    }
  }
  for (const Response& r : planned) {
    ASSERT_EQ(r.names.size(), r.sizes.size());
    if (!Fusable(r, threshold) && r.names.size() == 1) {
      alone_after.push_back(r);
      continue;
    }
    EXPECT_EQ(r.type, ResponseType::kAllreduce);
    EXPECT_LE(ResponseBytes(r), threshold);
    auto& names = fused_after[Key(r.dtype, r.reduce_op)];
    names.insert(names.end(), r.names.begin(), r.names.end());
  }
  EXPECT_EQ(alone_before, alone_after);
  EXPECT_EQ(fused_before, fused_after);
  EXPECT_FALSE(alone_before.empty());
}

TEST(FusionBufferTest, GrowsInPagesAndReusesMemory) {
  FusionBuffer buffer;
  EXPECT_EQ(buffer.capacity(), 0);

  void* first = buffer.Get(1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  EXPECT_EQ(buffer.capacity(), 4096);
  std::memset(first, 0xab, 4096);  // the whole capacity is usable

  EXPECT_EQ(buffer.Get(4096), first);
  EXPECT_EQ(buffer.Get(10), first);
  EXPECT_EQ(buffer.capacity(), 4096);

  void* grown = buffer.Get(4097);
  ASSERT_NE(grown, nullptr);
  EXPECT_EQ(buffer.capacity(), 8192);
  std::memset(grown, 0xcd, 8192);

  // Smaller requests afterwards keep the larger block.
  EXPECT_EQ(buffer.Get(100), grown);
  EXPECT_EQ(buffer.Get(8192), grown);
  EXPECT_EQ(buffer.capacity(), 8192);
}

}  // namespace
}  // namespace lockstep
