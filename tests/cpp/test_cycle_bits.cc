// The per-cycle bit vector: what one rank encodes, what the AND of several decodes to,
// and rejection of vectors no set of ranks could have produced.
#include <gtest/gtest.h>

#include <vector>

#include "wire/cycle_bits.h"
#include "wire/wire.h"

namespace lockstep {
namespace {

std::vector<uint64_t> AndOf(const std::vector<std::vector<uint64_t>>& vectors) {
  std::vector<uint64_t> out(vectors.front().size(), ~uint64_t{0});
  for (const auto& v : vectors) {
    for (size_t i = 0; i < out.size(); ++i) out[i] &= v[i];
  }
  return out;
}

bool Bit(const std::vector<uint64_t>& words, int slot) {
  return (words[slot / 64] >> (slot % 64)) & 1;
}

TEST(CycleBits, OneRankDecodesToItsOwnFlagsAndSlots) {
  CycleBitsLocal local;
  local.has_pending = true;
  local.joined = true;
  local.ready_slots = {0, 63, 64, 99};
  CycleBitsSummary s = DecodeCycleBits(EncodeCycleBits(100, local), 100);
  EXPECT_TRUE(s.all_pending && s.any_pending && s.any_joined);
  EXPECT_FALSE(s.shutdown || s.need_full_round);
  ASSERT_EQ(s.ready.size(), 2u);
  for (int slot = 0; slot < 100; ++slot) {
    const bool expected = slot == 0 || slot == 63 || slot == 64 || slot == 99;
    EXPECT_EQ(Bit(s.ready, slot), expected) << slot;
    EXPECT_FALSE(Bit(s.partial, slot)) << slot;
  }
}

TEST(CycleBits, AndOfRanksGivesAllAnyReadyAndPartial) {
  CycleBitsLocal a, b;
  a.has_pending = true;
  a.ready_slots = {1, 2, 70};
  b.shutdown = true;
  b.need_full_round = true;
  b.ready_slots = {2, 3};
  CycleBitsSummary s =
      DecodeCycleBits(AndOf({EncodeCycleBits(128, a), EncodeCycleBits(128, b)}), 128);
  EXPECT_FALSE(s.all_pending);
  EXPECT_TRUE(s.any_pending && s.shutdown && s.need_full_round);
  EXPECT_FALSE(s.any_joined);
  EXPECT_TRUE(Bit(s.ready, 2));
  EXPECT_FALSE(Bit(s.ready, 1) || Bit(s.ready, 3) || Bit(s.ready, 70));
  EXPECT_TRUE(Bit(s.partial, 1) && Bit(s.partial, 3) && Bit(s.partial, 70));
  EXPECT_FALSE(Bit(s.partial, 2) || Bit(s.partial, 0));
}

TEST(CycleBits, DisabledCacheIsFlagsOnly) {
  CycleBitsLocal local;
  local.shutdown = true;
  std::vector<uint64_t> vec = EncodeCycleBits(0, local);
  EXPECT_EQ(vec.size(), 2u);
  CycleBitsSummary s = DecodeCycleBits(vec, 0);
  EXPECT_TRUE(s.shutdown);
  EXPECT_TRUE(s.ready.empty() && s.partial.empty());
}

TEST(CycleBits, SlotOutsideTheCacheIsRefused) {
  CycleBitsLocal local;
  local.ready_slots = {64};
  EXPECT_THROW(EncodeCycleBits(64, local), WireError);
  local.ready_slots = {-1};
  EXPECT_THROW(EncodeCycleBits(64, local), WireError);
}

TEST(CycleBits, ImpossibleVectorsAreRejected) {
  std::vector<uint64_t> good = EncodeCycleBits(100, CycleBitsLocal{});
  EXPECT_THROW(DecodeCycleBits(std::vector<uint64_t>(good.begin(), good.end() - 1), 100),
               WireError);
  auto bad = good;
  bad[0] |= 2;  // an AND flag that does not exist
  EXPECT_THROW(DecodeCycleBits(bad, 100), WireError);
  bad = good;
  bad[1] &= ~uint64_t{16};  // an OR flag that does not exist
  EXPECT_THROW(DecodeCycleBits(bad, 100), WireError);
  bad = good;
  bad[2] |= 1;  // ready everywhere but, by its complement, on no rank
  EXPECT_THROW(DecodeCycleBits(bad, 100), WireError);
  bad = good;
  bad[3] |= uint64_t{1} << 40;  // slot 104 of a 100-slot cache
  bad[5] &= ~(uint64_t{1} << 40);
  EXPECT_THROW(DecodeCycleBits(bad, 100), WireError);
}

}  // namespace
}  // namespace lockstep
