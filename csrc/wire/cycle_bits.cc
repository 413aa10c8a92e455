#include "wire/cycle_bits.h"

#include <algorithm>
#include <string>

#include "wire/wire.h"

namespace lockstep {
namespace {

constexpr uint64_t kAndHasPending = 1;
constexpr uint64_t kAndFlags = kAndHasPending;
constexpr uint64_t kOrNeedFullRound = 1;
constexpr uint64_t kOrShutdown = 2;
constexpr uint64_t kOrJoined = 4;
constexpr uint64_t kOrHasPending = 8;
constexpr uint64_t kOrFlags = kOrNeedFullRound | kOrShutdown | kOrJoined | kOrHasPending;

// The bits of the last word that lie beyond the capacity (never set by any rank).
uint64_t UnusedTailBits(int cache_capacity) {
  const int used = cache_capacity % 64;
  return used == 0 ? 0 : ~uint64_t{0} << used;
}

}  // namespace

size_t CycleBitsWords(int cache_capacity) {
  const size_t slot_words =
      cache_capacity > 0 ? (static_cast<size_t>(cache_capacity) + 63) / 64 : 0;
  return 2 + 2 * slot_words;
}

std::vector<uint64_t> EncodeCycleBits(int cache_capacity, const CycleBitsLocal& local) {
  std::vector<uint64_t> vec(CycleBitsWords(cache_capacity), 0);
  EncodeCycleBitsInto(cache_capacity, local, vec.data());
  return vec;
}

void EncodeCycleBitsInto(int cache_capacity, const CycleBitsLocal& local, uint64_t* vec) {
  const size_t words = (CycleBitsWords(cache_capacity) - 2) / 2;
  std::fill(vec, vec + 2 + 2 * words, 0);
  uint64_t or_flags = 0;
  if (local.need_full_round) or_flags |= kOrNeedFullRound;
  if (local.shutdown) or_flags |= kOrShutdown;
  if (local.joined) or_flags |= kOrJoined;
  if (local.has_pending) or_flags |= kOrHasPending;
  vec[0] = local.has_pending ? kAndHasPending : 0;
  vec[1] = ~or_flags;
  for (int32_t slot : local.ready_slots) {
    if (slot < 0 || slot >= cache_capacity) {
      throw WireError("cache slot " + std::to_string(slot) + " outside a cache of " +
                      std::to_string(cache_capacity));
    }
    vec[2 + slot / 64] |= uint64_t{1} << (slot % 64);
  }
  for (size_t w = 0; w < words; ++w) vec[2 + words + w] = ~vec[2 + w];
}

CycleBitsSummary DecodeCycleBits(const std::vector<uint64_t>& reduced, int cache_capacity) {
  return DecodeCycleBits(reduced.data(), reduced.size(), cache_capacity);
}

CycleBitsSummary DecodeCycleBits(const uint64_t* reduced, size_t size, int cache_capacity) {
  CycleBitsSummary summary;
  DecodeCycleBitsInto(reduced, size, cache_capacity, &summary);
  return summary;
}

void DecodeCycleBitsInto(const uint64_t* reduced, size_t size, int cache_capacity,
                         CycleBitsSummary* out) {
  if (size != CycleBitsWords(cache_capacity)) {
    throw WireError("cycle bit vector of " + std::to_string(size) + " words where " +
                    std::to_string(CycleBitsWords(cache_capacity)) + " were expected");
  }
  const size_t words = (size - 2) / 2;
  const uint64_t any = ~reduced[1];
  if ((reduced[0] & ~kAndFlags) != 0 || (any & ~kOrFlags) != 0) {
    throw WireError("cycle bit vector sets unknown flags");
  }
  CycleBitsSummary& summary = *out;
  summary.all_pending = (reduced[0] & kAndHasPending) != 0;
  summary.any_pending = (any & kOrHasPending) != 0;
  summary.need_full_round = (any & kOrNeedFullRound) != 0;
  summary.shutdown = (any & kOrShutdown) != 0;
  summary.any_joined = (any & kOrJoined) != 0;
  summary.ready.assign(reduced + 2, reduced + 2 + words);
  summary.partial.resize(words);
  for (size_t w = 0; w < words; ++w) {
    const uint64_t on_some = ~reduced[2 + words + w];
    summary.partial[w] = on_some & ~reduced[2 + w];
    // Every bit set on every rank is set on some rank; a vector saying otherwise was
    // not produced by EncodeCycleBits.
    if ((reduced[2 + w] & ~on_some) != 0) throw WireError("cycle bit vector contradicts itself");
  }
  if (words > 0 &&
      ((summary.ready.back() | summary.partial.back()) & UnusedTailBits(cache_capacity))) {
    throw WireError("cycle bit vector sets slots beyond the cache capacity " +
                    std::to_string(cache_capacity));
  }
}

}  // namespace lockstep
