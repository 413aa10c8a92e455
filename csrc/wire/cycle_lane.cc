#include "wire/cycle_lane.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "wire/wire.h"

namespace lockstep {
namespace {

// "LANE" in the descriptor's high half; the payload's length in words in the low one.
constexpr uint64_t kLaneMagic = 0x4c414e45;
constexpr size_t kLaneFixedWords = 3;  // descriptor, header, ~header

// Header bits: slot 0-23, dtype 24-31, reduce op 32-39, count 40-55, valid 63.
constexpr uint64_t kValid = uint64_t{1} << 63;
constexpr int32_t kMaxSlot = (1 << 24) - 1;
constexpr uint64_t kEmptyHeader = 0;

uint64_t Descriptor(size_t payload_words) { return kLaneMagic << 32 | payload_words; }

bool KnownReduceOp(uint8_t raw) {
  switch (static_cast<ReduceOp>(raw)) {
    case ReduceOp::kAverage:
    case ReduceOp::kSum:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
    case ReduceOp::kProduct:
      return true;
    case ReduceOp::kAdasum:
      return false;
  }
  return false;
}

uint64_t PackHeader(const LaneHeader& h) {
  return kValid | static_cast<uint64_t>(h.slot) |
         static_cast<uint64_t>(static_cast<uint8_t>(h.dtype)) << 24 |
         static_cast<uint64_t>(static_cast<uint8_t>(h.reduce_op)) << 32 |
         static_cast<uint64_t>(h.count) << 40;
}

// False for the empty header and for anything a valid header could not be.
bool UnpackHeader(uint64_t word, uint64_t complement, size_t payload_words, LaneHeader* out) {
  if (complement != ~word || (word & kValid) == 0) return false;
  if ((word & ~(kValid | ((uint64_t{1} << 56) - 1))) != 0) return false;  // unused bits set
  const auto raw_dtype = static_cast<uint8_t>(word >> 24);
  const auto raw_op = static_cast<uint8_t>(word >> 32);
  if (!IsValidDataType(raw_dtype) || !KnownReduceOp(raw_op)) return false;
  LaneHeader h;
  h.slot = static_cast<int32_t>(word & 0xffffff);
  h.dtype = static_cast<DataType>(raw_dtype);
  h.reduce_op = static_cast<ReduceOp>(raw_op);
  h.count = static_cast<int32_t>((word >> 40) & 0xffff);
  if (!LaneCanCarry(h, static_cast<int>(payload_words * 8))) return false;
  *out = h;
  return true;
}

size_t PayloadWords(int payload_bytes) {
  if (payload_bytes <= 0 || payload_bytes > kMaxLanePayloadBytes || payload_bytes % 8 != 0) {
    throw WireError("a payload lane of " + std::to_string(payload_bytes) +
                    " bytes (a multiple of 8 from 8 to " + std::to_string(kMaxLanePayloadBytes) +
                    " is required)");
  }
  return static_cast<size_t>(payload_bytes) / 8;
}

}  // namespace

bool LaneCanCarry(const LaneHeader& header, int payload_bytes) {
  if (header.slot < 0 || header.slot > kMaxSlot || header.count < 1) return false;
  if (!IsValidDataType(static_cast<uint8_t>(header.dtype))) return false;
  if (!KnownReduceOp(static_cast<uint8_t>(header.reduce_op))) return false;
  return static_cast<int64_t>(header.count) * static_cast<int64_t>(DataTypeSize(header.dtype)) <=
         payload_bytes;
}

size_t CycleVectorWords(int cache_capacity, int payload_bytes) {
  return kLaneFixedWords + PayloadWords(payload_bytes) + CycleBitsWords(cache_capacity);
}

std::vector<uint64_t> EncodeCycleVector(int cache_capacity, const CycleBitsLocal& local,
                                        int payload_bytes, const LaneHeader* header,
                                        const void* payload) {
  std::vector<uint64_t> vec;
  EncodeCycleVectorInto(cache_capacity, local, payload_bytes, header, payload, &vec);
  return vec;
}

void EncodeCycleVectorInto(int cache_capacity, const CycleBitsLocal& local, int payload_bytes,
                           const LaneHeader* header, const void* payload,
                           std::vector<uint64_t>* out) {
  const size_t payload_words = PayloadWords(payload_bytes);
  std::vector<uint64_t>& vec = *out;
  vec.assign(CycleVectorWords(cache_capacity, payload_bytes), 0);
  vec[0] = Descriptor(payload_words);
  vec[1] = kEmptyHeader;
  if (header != nullptr) {
    if (!LaneCanCarry(*header, payload_bytes) || header->slot >= cache_capacity) {
      throw WireError("lane header for slot " + std::to_string(header->slot) + " with " +
                      std::to_string(header->count) + " elements does not fit the lane");
    }
    vec[1] = PackHeader(*header);
    std::memcpy(&vec[kLaneFixedWords], payload,
                static_cast<size_t>(header->count) * DataTypeSize(header->dtype));
  }
  vec[2] = ~vec[1];
  EncodeCycleBitsInto(cache_capacity, local, vec.data() + kLaneFixedWords + payload_words);
}

CycleVectorSummary DecodeCycleVector(const std::vector<uint64_t>& reduced, int cache_capacity,
                                     int payload_bytes) {
  CycleVectorSummary summary;
  DecodeCycleVectorInto(reduced, cache_capacity, payload_bytes, &summary);
  return summary;
}

void DecodeCycleVectorInto(const std::vector<uint64_t>& reduced, int cache_capacity,
                           int payload_bytes, CycleVectorSummary* out) {
  const size_t payload_words = PayloadWords(payload_bytes);
  if (reduced.size() != CycleVectorWords(cache_capacity, payload_bytes)) {
    throw WireError("cycle vector of " + std::to_string(reduced.size()) + " words where " +
                    std::to_string(CycleVectorWords(cache_capacity, payload_bytes)) +
                    " were expected");
  }
  if (reduced[0] != Descriptor(payload_words)) {
    throw WireError("cycle vector with a foreign lane descriptor");
  }
  CycleVectorSummary& summary = *out;
  summary.lane_valid = false;
  summary.lane = LaneHeader{};
  const size_t bits_at = kLaneFixedWords + payload_words;
  DecodeCycleBitsInto(reduced.data() + bits_at, reduced.size() - bits_at, cache_capacity,
                      &summary.bits);
  const bool empty = reduced[1] == kEmptyHeader && reduced[2] == ~kEmptyHeader;
  if (empty) return;
  if (!UnpackHeader(reduced[1], reduced[2], payload_words, &summary.lane) ||
      summary.lane.slot >= cache_capacity) {
    throw WireError("cycle vector with a malformed lane header");
  }
  // Every byte past the payload's elements stays zero (encoders zero them, combining
  // touches only the elements).
  const uint64_t* payload = &reduced[kLaneFixedWords];
  const size_t used = static_cast<size_t>(summary.lane.count) * DataTypeSize(summary.lane.dtype);
  uint64_t spill = 0;
  if (used % 8 != 0) {
    uint64_t last = 0;
    std::memcpy(&last, reinterpret_cast<const uint8_t*>(payload) + used, 8 - used % 8);
    spill |= last;
  }
  for (size_t w = (used + 7) / 8; w < payload_words; ++w) spill |= payload[w];
  if (spill != 0) throw WireError("cycle vector with a payload past its element count");
  summary.lane_valid = true;
  summary.payload.fill(0);
  std::memcpy(summary.payload.data(), payload, used);
}

void CombineCycleVectors(const uint64_t* in, uint64_t* inout, size_t words,
                         LanePayloadReduce reduce) {
  const uint64_t descriptor = inout[0];
  const size_t payload_words = descriptor & 0xffffffff;
  const bool shaped = in[0] == descriptor && descriptor >> 32 == kLaneMagic && payload_words >= 1 &&
                      payload_words * 8 <= kMaxLanePayloadBytes &&
                      words >= kLaneFixedWords + payload_words;
  if (!shaped) {
    for (size_t i = 0; i < words; ++i) inout[i] &= in[i];
    return;
  }
  for (size_t i = kLaneFixedWords + payload_words; i < words; ++i) inout[i] &= in[i];
  LaneHeader mine, theirs;
  if (in[1] == inout[1] && UnpackHeader(inout[1], inout[2], payload_words, &mine) &&
      UnpackHeader(in[1], in[2], payload_words, &theirs)) {
    reduce(mine, in + kLaneFixedWords, inout + kLaneFixedWords);
    return;
  }
  inout[1] = kEmptyHeader;
  inout[2] = ~kEmptyHeader;
  std::fill(inout + kLaneFixedWords, inout + kLaneFixedWords + payload_words, 0);
}

}  // namespace lockstep
