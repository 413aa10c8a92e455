// The fixed-size vector every rank contributes to each cycle's bitwise-AND allreduce:
// a few flags and one bit per response-cache slot. It is laid out as
// [AND flags][~OR flags][slot bits][~slot bits], so the one reduction yields both what
// every rank has (the AND) and what any rank has (the complement of the AND of the
// complements).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep {

// What one rank contributes.
struct CycleBitsLocal {
  bool has_pending = false;      // this rank holds ops it has not completed
  bool need_full_round = false;  // new requests (or a stall check) need the coordinator
  bool shutdown = false;
  bool joined = false;
  std::vector<int32_t> ready_slots;  // cache slots this rank has ready
};

// What the reduced vector says about all ranks.
struct CycleBitsSummary {
  bool all_pending = false;
  bool any_pending = false;
  bool need_full_round = false;
  bool shutdown = false;
  bool any_joined = false;
  std::vector<uint64_t> ready;    // bit per slot: ready on every rank
  std::vector<uint64_t> partial;  // bit per slot: ready on some ranks but not all
};

size_t CycleBitsWords(int cache_capacity);  // the vector's length in u64 words
// Throws WireError for a slot outside [0, cache_capacity).
std::vector<uint64_t> EncodeCycleBits(int cache_capacity, const CycleBitsLocal& local);
// The same into `out`, CycleBitsWords(cache_capacity) words (a longer vector's tail).
void EncodeCycleBitsInto(int cache_capacity, const CycleBitsLocal& local, uint64_t* out);
// Throws WireError when the vector has the wrong length or sets bits beyond the
// capacity or flags that do not exist (a rank configured differently, or corruption).
CycleBitsSummary DecodeCycleBits(const std::vector<uint64_t>& reduced, int cache_capacity);
CycleBitsSummary DecodeCycleBits(const uint64_t* reduced, size_t words, int cache_capacity);
// The same into *out, whose vectors keep their capacity (negotiation decodes one per
// cycle).
void DecodeCycleBitsInto(const uint64_t* reduced, size_t words, int cache_capacity,
                         CycleBitsSummary* out);

}  // namespace lockstep
