// The cycle vector's payload lane: what one rank encodes, how two vectors combine
// (agreeing headers reduce their payloads with the payload lane's reduction,
// backends/host/payload_lane, anything else empties the lane), and rejection of
// vectors no set of ranks could have produced.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/host/payload_lane.h"
#include "common/half.h"
#include "reduction/reduce_kernels.h"
#include "wire/cycle_lane.h"
#include "wire/wire.h"

namespace lockstep {
namespace {

constexpr int kCapacity = 100;
constexpr int kLane = 64;

LaneHeader Header(int32_t slot, DataType dtype, ReduceOp op, int32_t count) {
  LaneHeader h;
  h.slot = slot;
  h.dtype = dtype;
  h.reduce_op = op;
  h.count = count;
  return h;
}

template <typename T>
std::vector<uint64_t> Carrying(const LaneHeader& header, const std::vector<T>& values,
                               std::vector<int32_t> ready = {}) {
  CycleBitsLocal local;
  local.has_pending = true;
  local.ready_slots = ready.empty() ? std::vector<int32_t>{header.slot} : std::move(ready);
  return EncodeCycleVector(kCapacity, local, kLane, &header, values.data());
}

std::vector<uint64_t> Empty(std::vector<int32_t> ready = {}) {
  CycleBitsLocal local;
  local.ready_slots = std::move(ready);
  return EncodeCycleVector(kCapacity, local, kLane, nullptr, nullptr);
}

// Folds the vectors in the given order, as one reduction across ranks would.
std::vector<uint64_t> Combine(std::vector<std::vector<uint64_t>> vectors) {
  std::vector<uint64_t> acc = vectors.front();
  for (size_t i = 1; i < vectors.size(); ++i) {
    CombineLaneVectors(vectors[i].data(), acc.data(), acc.size());
  }
  return acc;
}

template <typename T>
std::vector<T> PayloadOf(const CycleVectorSummary& s) {
  std::vector<T> values(static_cast<size_t>(s.lane.count));
  std::memcpy(values.data(), s.payload.data(), values.size() * sizeof(T));
  return values;
}

bool Bit(const std::vector<uint64_t>& words, int slot) {
  return (words[slot / 64] >> (slot % 64)) & 1;
}

TEST(CycleLane, OneRankDecodesToItsOwnHeaderPayloadAndBits) {
  const LaneHeader h = Header(7, DataType::kInt32, ReduceOp::kSum, 3);
  CycleVectorSummary s =
      DecodeCycleVector(Carrying(h, std::vector<int32_t>{1, -2, 3}, {7, 70}), kCapacity, kLane);
  ASSERT_TRUE(s.lane_valid);
  EXPECT_EQ(s.lane, h);
  EXPECT_EQ(PayloadOf<int32_t>(s), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_TRUE(s.bits.all_pending);
  EXPECT_TRUE(Bit(s.bits.ready, 7) && Bit(s.bits.ready, 70) && !Bit(s.bits.ready, 8));
  EXPECT_EQ(CycleVectorWords(kCapacity, kLane), 3 + kLane / 8 + CycleBitsWords(kCapacity));
}

TEST(CycleLane, AnEmptyLaneDecodesAsNoLane) {
  CycleVectorSummary s = DecodeCycleVector(Empty({5}), kCapacity, kLane);
  EXPECT_FALSE(s.lane_valid);
  EXPECT_TRUE(Bit(s.bits.ready, 5));
}

TEST(CycleLane, AgreeingHeadersReduceTheirPayloadsAndTheBitsAreAnded) {
  const LaneHeader h = Header(3, DataType::kInt64, ReduceOp::kProduct, 2);
  auto a = Carrying(h, std::vector<int64_t>{3, -5}, {3, 9});
  auto b = Carrying(h, std::vector<int64_t>{7, 11}, {3});
  auto c = Carrying(h, std::vector<int64_t>{2, 2}, {3, 9});
  for (const auto& order : {Combine({a, b, c}), Combine({c, a, b}), Combine({b, c, a})}) {
    CycleVectorSummary s = DecodeCycleVector(order, kCapacity, kLane);
    ASSERT_TRUE(s.lane_valid);
    EXPECT_EQ(PayloadOf<int64_t>(s), (std::vector<int64_t>{42, -110}));
    EXPECT_TRUE(Bit(s.bits.ready, 3));
    EXPECT_FALSE(Bit(s.bits.ready, 9));
    EXPECT_TRUE(Bit(s.bits.partial, 9));
  }
}

TEST(CycleLane, SmallIntegerSumsWrapAsTheDataPathsKernelDoes) {
  const LaneHeader h = Header(0, DataType::kUInt8, ReduceOp::kSum, 3);
  const LaneHeader g = Header(0, DataType::kInt8, ReduceOp::kSum, 1);
  CycleVectorSummary u = DecodeCycleVector(Combine({Carrying(h, std::vector<uint8_t>{200, 255, 1}),
                                                    Carrying(h, std::vector<uint8_t>{200, 1, 2})}),
                                           kCapacity, kLane);
  ASSERT_TRUE(u.lane_valid);
  EXPECT_EQ(PayloadOf<uint8_t>(u), (std::vector<uint8_t>{144, 0, 3}));
  CycleVectorSummary i = DecodeCycleVector(
      Combine({Carrying(g, std::vector<int8_t>{100}), Carrying(g, std::vector<int8_t>{100})}),
      kCapacity, kLane);
  EXPECT_EQ(PayloadOf<int8_t>(i), (std::vector<int8_t>{-56}));
}

TEST(CycleLane, SixteenBitFloatsCombineLikeTheKernelInFloat) {
  const LaneHeader h = Header(1, DataType::kBFloat16, ReduceOp::kSum, 1);
  const std::vector<uint16_t> a{FloatToBFloat16(1.0f)}, b{FloatToBFloat16(0.00390625f)};
  CycleVectorSummary s =
      DecodeCycleVector(Combine({Carrying(h, a), Carrying(h, b)}), kCapacity, kLane);
  ASSERT_TRUE(s.lane_valid);
  uint16_t expected = b[0];
  ReduceInto(a.data(), &expected, 1, DataType::kBFloat16, ReduceOp::kSum);
  EXPECT_EQ(PayloadOf<uint16_t>(s), std::vector<uint16_t>{expected});
}

TEST(CycleLane, DisagreeingHeadersEmptyTheLaneButKeepTheBits) {
  const std::vector<int32_t> one{1};
  const auto slot3 = Carrying(Header(3, DataType::kInt32, ReduceOp::kSum, 1), one, {3, 4});
  const std::vector<std::vector<uint64_t>> others = {
      Carrying(Header(4, DataType::kInt32, ReduceOp::kSum, 1), one, {3, 4}),  // another slot
      Carrying(Header(3, DataType::kInt32, ReduceOp::kMax, 1), one, {3, 4}),  // another op
      Carrying(Header(3, DataType::kFloat32, ReduceOp::kSum, 1), one, {3, 4}),
      Carrying(Header(3, DataType::kInt32, ReduceOp::kSum, 2), std::vector<int32_t>{1, 1}, {3, 4}),
      Empty({3, 4}),  // nothing carried (joined, several pending, a NaN, ...)
  };
  for (const auto& other : others) {
    for (const auto& combined : {Combine({slot3, other}), Combine({other, slot3})}) {
      CycleVectorSummary s = DecodeCycleVector(combined, kCapacity, kLane);
      EXPECT_FALSE(s.lane_valid);
      EXPECT_TRUE(Bit(s.bits.ready, 3) && Bit(s.bits.ready, 4));
    }
  }
  // Once emptied, agreeing ranks later in the reduction cannot revive it.
  EXPECT_FALSE(DecodeCycleVector(Combine({slot3, Empty({3}), slot3}), kCapacity, kLane).lane_valid);
}

TEST(CycleLane, MalformedHeadersNeverCombineAndDoNotDecode) {
  const LaneHeader h = Header(3, DataType::kInt32, ReduceOp::kSum, 1);
  auto good = Carrying(h, std::vector<int32_t>{5});
  auto bad_complement = good;
  bad_complement[2] ^= 1;
  auto adasum = good;
  adasum[1] = (adasum[1] & ~(uint64_t{0xff} << 32)) | uint64_t{2} << 32;  // Adasum
  adasum[2] = ~adasum[1];
  for (const auto& bad : {bad_complement, adasum}) {
    EXPECT_THROW(DecodeCycleVector(bad, kCapacity, kLane), WireError);
    // Combined with a valid lane carrying the "same" header, the lane empties.
    EXPECT_FALSE(DecodeCycleVector(Combine({good, bad}), kCapacity, kLane).lane_valid);
  }
  auto spilled = good;
  spilled[3] |= uint64_t{1} << 40;  // a byte past the one int32 the header counts
  EXPECT_THROW(DecodeCycleVector(spilled, kCapacity, kLane), WireError);
}

TEST(CycleLane, ForeignDescriptorsAndLengthsAreRejected) {
  auto good = Empty();
  auto foreign = good;
  foreign[0] ^= uint64_t{1} << 32;  // a bit of the magic that is set
  EXPECT_THROW(DecodeCycleVector(foreign, kCapacity, kLane), WireError);
  // Combining vectors of different layouts ANDs them whole, which then fails to decode.
  EXPECT_THROW(DecodeCycleVector(Combine({good, foreign}), kCapacity, kLane), WireError);
  EXPECT_THROW(DecodeCycleVector(good, kCapacity, 2 * kLane), WireError);
  EXPECT_THROW(DecodeCycleVector(good, kCapacity + 64, kLane), WireError);
  EXPECT_THROW(CycleVectorWords(kCapacity, 12), WireError);  // not a multiple of 8
  EXPECT_THROW(CycleVectorWords(kCapacity, kMaxLanePayloadBytes + 8), WireError);
}

TEST(CycleLane, TheLaneCarriesOnlyWhatFits) {
  EXPECT_TRUE(LaneCanCarry(Header(0, DataType::kFloat32, ReduceOp::kAverage, 16), 64));
  EXPECT_FALSE(LaneCanCarry(Header(0, DataType::kFloat32, ReduceOp::kAverage, 17), 64));
  EXPECT_TRUE(LaneCanCarry(Header(0, DataType::kUInt8, ReduceOp::kMin, 64), 64));
  EXPECT_FALSE(LaneCanCarry(Header(0, DataType::kFloat64, ReduceOp::kAdasum, 1), 64));
  EXPECT_FALSE(LaneCanCarry(Header(0, DataType::kFloat64, ReduceOp::kSum, 0), 64));
  EXPECT_FALSE(LaneCanCarry(Header(-1, DataType::kFloat64, ReduceOp::kSum, 1), 64));
  CycleBitsLocal local;
  const LaneHeader too_big = Header(0, DataType::kFloat64, ReduceOp::kSum, 9);
  const std::vector<double> nine(9, 1.0);
  EXPECT_THROW(EncodeCycleVector(kCapacity, local, kLane, &too_big, nine.data()), WireError);
  const LaneHeader outside = Header(kCapacity, DataType::kFloat64, ReduceOp::kSum, 1);
  EXPECT_THROW(EncodeCycleVector(kCapacity, local, kLane, &outside, nine.data()), WireError);
}

}  // namespace
}  // namespace lockstep
