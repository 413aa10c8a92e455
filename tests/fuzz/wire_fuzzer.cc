// libFuzzer target: arbitrary bytes decoded as every wire message type. Decoding
// may reject the bytes (WireError) but must never crash, read out of bounds, hang or
// throw anything else; whatever decodes must survive a round trip unchanged
// (decode -> encode gives the same bytes, and decoding those gives an equal object).
// The same bytes also drive the cycle bit vector: a cache capacity and a few ranks'
// flags and slots, whose encodings are ANDed as the allreduce does and decoded, which
// must give exactly the flags and slot sets computed directly; and raw words, which
// must decode or be rejected, never crash. Then the payload lane: a few ranks' cycle
// vectors (headers from a small set, so they often agree; integer payloads, whose
// reduction is exact) combined in a random order must decode to the lane surviving
// exactly when every rank carried the same header, with the payload every rank's
// data reduced in rank order; and raw words combined with a real vector must decode
// or be rejected, never crash.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#include "reduction/reduce_kernels.h"
#include "wire/cycle_bits.h"
#include "wire/cycle_lane.h"
#include "wire/message.h"
#include "wire/wire.h"

namespace {

// The payload lane's reduction (backends/host/payload_lane's ReduceLanePayload, which
// the wire-only fuzzer does not link): the lanes' format is what is fuzzed here.
void ReducePayload(const lockstep::LaneHeader& lane, const void* in, void* inout) {
  lockstep::ReduceInto(in, inout, lane.count, lane.dtype, lane.reduce_op);
}

[[noreturn]] void RoundTripFailed(const char* what) {
  std::fprintf(stderr, "round trip of a decoded %s changed it\n", what);
  std::abort();
}

template <typename Message, typename Parse, typename Serialize>
void DecodeAndRoundTrip(const uint8_t* data, size_t size, const char* what, Parse parse,
                        Serialize serialize) {
  Message decoded;
  try {
    decoded = parse(data, size);
  } catch (const lockstep::WireError&) {
    return;  // rejected cleanly
  }
  std::vector<uint8_t> encoded = serialize(decoded);
  // The encoding is canonical and a parse consumes every byte, so the bytes come back.
  if (encoded.size() != size || !std::equal(encoded.begin(), encoded.end(), data)) {
    RoundTripFailed(what);
  }
  if (!(parse(encoded.data(), encoded.size()) == decoded)) RoundTripFailed(what);
}

bool Bit(const std::vector<uint64_t>& words, int slot) {
  return (words[static_cast<size_t>(slot) / 64] >> (slot % 64)) & 1;
}

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "cycle bits: %s\n", what);
  std::abort();
}

void CycleBitsOfRanks(FuzzedDataProvider& in) {
  const int capacity = in.ConsumeIntegralInRange<int>(0, 300);
  const int ranks = in.ConsumeIntegralInRange<int>(1, 4);
  std::vector<uint64_t> reduced(lockstep::CycleBitsWords(capacity), ~uint64_t{0});
  std::vector<std::set<int32_t>> slots(static_cast<size_t>(ranks));
  bool all_pending = true, any_pending = false, full = false, shutdown = false, joined = false;
  for (int r = 0; r < ranks; ++r) {
    lockstep::CycleBitsLocal local;
    local.has_pending = in.ConsumeBool();
    local.need_full_round = in.ConsumeBool();
    local.shutdown = in.ConsumeBool();
    local.joined = in.ConsumeBool();
    const int count = capacity > 0 ? in.ConsumeIntegralInRange<int>(0, 8) : 0;
    for (int i = 0; i < count; ++i) {
      const int32_t slot = in.ConsumeIntegralInRange<int32_t>(0, capacity - 1);
      local.ready_slots.push_back(slot);
      slots[static_cast<size_t>(r)].insert(slot);
    }
    all_pending = all_pending && local.has_pending;
    any_pending = any_pending || local.has_pending;
    full = full || local.need_full_round;
    shutdown = shutdown || local.shutdown;
    joined = joined || local.joined;
    std::vector<uint64_t> vec = lockstep::EncodeCycleBits(capacity, local);
    for (size_t i = 0; i < reduced.size(); ++i) reduced[i] &= vec[i];
  }
  lockstep::CycleBitsSummary s = lockstep::DecodeCycleBits(reduced, capacity);
  Check(s.all_pending == all_pending && s.any_pending == any_pending && s.need_full_round == full &&
            s.shutdown == shutdown && s.any_joined == joined,
        "flags differ from the ranks' flags");
  for (int slot = 0; slot < capacity; ++slot) {
    int on = 0;
    for (const auto& set : slots) on += static_cast<int>(set.count(slot));
    Check(Bit(s.ready, slot) == (on == ranks), "ready slots differ");
    Check(Bit(s.partial, slot) == (on > 0 && on < ranks), "partial slots differ");
  }
}

void CycleBitsFromRawWords(FuzzedDataProvider& in) {
  const int capacity = in.ConsumeIntegralInRange<int>(0, 300);
  std::vector<uint64_t> words(lockstep::CycleBitsWords(capacity) + in.ConsumeIntegralInRange(0, 1));
  for (uint64_t& word : words) word = in.ConsumeIntegral<uint64_t>();
  try {
    lockstep::CycleBitsSummary s = lockstep::DecodeCycleBits(words, capacity);
    for (size_t w = 0; w < s.ready.size(); ++w) {
      Check((s.ready[w] & s.partial[w]) == 0, "a slot both ready and partial");
    }
  } catch (const lockstep::WireError&) {
  }
}

lockstep::LaneHeader FuzzedHeader(FuzzedDataProvider& in, int capacity, int lane_bytes) {
  using lockstep::DataType;
  using lockstep::ReduceOp;
  static constexpr DataType kDtypes[] = {DataType::kUInt8, DataType::kInt8,  DataType::kInt16,
                                         DataType::kInt32, DataType::kInt64, DataType::kBool,
                                         DataType::kUInt16};
  static constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                      ReduceOp::kMax, ReduceOp::kProduct};
  lockstep::LaneHeader h;
  h.slot = in.ConsumeIntegralInRange<int32_t>(0, std::min(capacity - 1, 2));
  h.dtype = kDtypes[in.ConsumeIntegralInRange<size_t>(0, 6)];
  h.reduce_op = kOps[in.ConsumeIntegralInRange<size_t>(0, 4)];
  const int most = lane_bytes / static_cast<int>(lockstep::DataTypeSize(h.dtype));
  h.count = in.ConsumeIntegralInRange<int32_t>(1, std::min(most, 3));
  return h;
}

void LanesOfRanks(FuzzedDataProvider& in) {
  const int capacity = in.ConsumeIntegralInRange<int>(1, 130);
  const int lane_bytes = 8 * in.ConsumeIntegralInRange<int>(1, 4);
  const int ranks = in.ConsumeIntegralInRange<int>(1, 4);
  const lockstep::LaneHeader shared = FuzzedHeader(in, capacity, lane_bytes);
  std::vector<std::vector<uint64_t>> vectors;
  std::vector<std::vector<uint8_t>> payloads;
  std::vector<lockstep::LaneHeader> carried;  // by rank, when it carries
  for (int r = 0; r < ranks; ++r) {
    lockstep::CycleBitsLocal local;
    local.ready_slots.push_back(in.ConsumeIntegralInRange<int32_t>(0, capacity - 1));
    const int kind = in.ConsumeIntegralInRange<int>(0, 3);  // mostly the shared header
    lockstep::LaneHeader header = kind == 0 ? FuzzedHeader(in, capacity, lane_bytes) : shared;
    std::vector<uint8_t> payload = in.ConsumeBytes<uint8_t>(static_cast<size_t>(header.count) *
                                                            lockstep::DataTypeSize(header.dtype));
    payload.resize(static_cast<size_t>(header.count) * lockstep::DataTypeSize(header.dtype));
    if (header.dtype == lockstep::DataType::kBool) {
      for (uint8_t& b : payload) b &= 1;
    }
    const bool carry = kind != 1;
    if (carry) carried.push_back(header);
    vectors.push_back(lockstep::EncodeCycleVector(capacity, local, lane_bytes,
                                                  carry ? &header : nullptr, payload.data()));
    payloads.push_back(std::move(payload));
  }
  std::vector<size_t> order(vectors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[in.ConsumeIntegralInRange<size_t>(0, i - 1)]);
  }
  std::vector<uint64_t> reduced = vectors[order[0]];
  for (size_t i = 1; i < order.size(); ++i) {
    lockstep::CombineCycleVectors(vectors[order[i]].data(), reduced.data(), reduced.size(),
                                  &ReducePayload);
  }
  lockstep::CycleVectorSummary s = lockstep::DecodeCycleVector(reduced, capacity, lane_bytes);
  const bool agreed = carried.size() == vectors.size() &&
                      std::all_of(carried.begin(), carried.end(),
                                  [&](const lockstep::LaneHeader& h) { return h == carried[0]; });
  Check(s.lane_valid == agreed,
        "the lane survived where ranks disagreed, or not where they agreed");
  if (!s.lane_valid) return;
  Check(s.lane == carried[0], "the lane's header changed");
  const lockstep::LaneHeader& shared_header = carried[0];
  std::vector<uint8_t> expected = payloads[0];
  for (size_t r = 1; r < payloads.size(); ++r) {
    lockstep::ReduceInto(payloads[r].data(), expected.data(), shared_header.count,
                         shared_header.dtype, shared_header.reduce_op);
  }
  Check(std::equal(expected.begin(), expected.end(), s.payload.begin()),
        "the lane's payload differs");
}

void LaneFromRawWords(FuzzedDataProvider& in) {
  const int capacity = in.ConsumeIntegralInRange<int>(0, 130);
  const int lane_bytes = 8 * in.ConsumeIntegralInRange<int>(1, 4);
  std::vector<uint64_t> real = lockstep::EncodeCycleVector(capacity, lockstep::CycleBitsLocal(),
                                                           lane_bytes, nullptr, nullptr);
  std::vector<uint64_t> raw(real.size());
  for (uint64_t& word : raw) word = in.ConsumeIntegral<uint64_t>();
  if (in.ConsumeBool()) raw[0] = real[0];  // a valid descriptor, so the lane is looked at
  lockstep::CombineCycleVectors(raw.data(), real.data(), real.size(), &ReducePayload);
  try {
    lockstep::DecodeCycleVector(real, capacity, lane_bytes);
    lockstep::DecodeCycleVector(raw, capacity, lane_bytes);
  } catch (const lockstep::WireError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeAndRoundTrip<lockstep::RequestList>(data, size, "request list", lockstep::ParseRequestList,
                                            lockstep::SerializeRequestList);
  DecodeAndRoundTrip<lockstep::ResponseList>(
      data, size, "response list", lockstep::ParseResponseList, lockstep::SerializeResponseList);
  FuzzedDataProvider bits(data, size);
  CycleBitsOfRanks(bits);
  CycleBitsFromRawWords(bits);
  LanesOfRanks(bits);
  LaneFromRawWords(bits);
  return 0;
}
