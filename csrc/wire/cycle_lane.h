// The cycle vector with a payload lane: the negotiation bits (cycle_bits.h) plus room
// for one small cached allreduce's data, so that the cycle's one reduction across
// ranks also reduces that tensor and it needs no data collective of its own. This is
// the lane's format only: what rides is decided by negotiation (negotiation/controller),
// and the data (reading it, prescaling, reducing the payloads, finishing the result)
// is handled beside the host collectives (backends/host/payload_lane).
//
// Layout, in u64 words, the same length on every rank (so every rank's count agrees):
//   [descriptor][header][~header][payload: payload_bytes / 8 words][cycle bits]
// The descriptor names the layout (a magic and the payload's length in words), so the
// combining function needs nothing but the two vectors and their length. The header
// says which cache slot the payload belongs to and how it reduces; a rank with nothing
// to carry writes the empty header (0 and its complement). Two lanes combine only when
// both carry the same valid header; otherwise the result is the empty header, so the
// lane survives the whole reduction only when every rank put the same tensor in it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/types.h"
#include "wire/cycle_bits.h"

namespace lockstep {

// The largest payload LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES may ask for.
constexpr int kMaxLanePayloadBytes = 256;

// What a lane carries: a cache slot's allreduce, `count` elements of `dtype` combined
// with `reduce_op` (Average combines as Sum).
struct LaneHeader {
  int32_t slot = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t count = 0;

  bool operator==(const LaneHeader& other) const {
    return slot == other.slot && dtype == other.dtype && reduce_op == other.reduce_op &&
           count == other.count;
  }
};

// Whether a lane of `payload_bytes` can carry and combine this: a slot the header can
// hold, a dtype, a reduce op other than Adasum, and 1 to payload_bytes' worth of
// elements.
bool LaneCanCarry(const LaneHeader& header, int payload_bytes);

// The vector's length; payload_bytes must be a multiple of 8 from 8 to
// kMaxLanePayloadBytes.
size_t CycleVectorWords(int cache_capacity, int payload_bytes);

// `header` null: an empty lane. Otherwise `payload` holds header->count elements
// (already prescaled: the lane carries exactly what the data path would reduce).
// Throws WireError for a header the lane cannot carry or a slot outside the cache.
std::vector<uint64_t> EncodeCycleVector(int cache_capacity, const CycleBitsLocal& local,
                                        int payload_bytes, const LaneHeader* header,
                                        const void* payload);
// The same into *out (its capacity reused: negotiation encodes one per cycle).
void EncodeCycleVectorInto(int cache_capacity, const CycleBitsLocal& local, int payload_bytes,
                           const LaneHeader* header, const void* payload,
                           std::vector<uint64_t>* out);

struct CycleVectorSummary {
  CycleBitsSummary bits;
  bool lane_valid = false;  // every rank carried `lane`
  LaneHeader lane;
  // lane.count combined elements, copied out of the vector (the rest zero), so the
  // summary outlives it.
  std::array<uint8_t, kMaxLanePayloadBytes> payload{};
};

// Throws WireError for a vector of the wrong length, a foreign descriptor, a header
// that is neither empty nor valid, a payload that spills past its count, or bits that
// DecodeCycleBits rejects.
CycleVectorSummary DecodeCycleVector(const std::vector<uint64_t>& reduced, int cache_capacity,
                                     int payload_bytes);
// The same into *out, whose vectors keep their capacity.
void DecodeCycleVectorInto(const std::vector<uint64_t>& reduced, int cache_capacity,
                           int payload_bytes, CycleVectorSummary* out);

// How two lanes' payloads combine, once the format has found that both carry `lane`:
// inout = reduce(in, inout), lane.count elements. Commutative and associative.
using LanePayloadReduce = void (*)(const LaneHeader& lane, const void* in, void* inout);

// The reduction across ranks, inout = combine(in, inout), for vectors of `words` words:
// bitwise AND of the bits; the lanes as described above, their payloads with
// `reduce`. Commutative and associative when `reduce` is, so MPI may apply it in any
// order. Vectors whose descriptors differ or are not lane descriptors are ANDed whole
// (DecodeCycleVector then rejects the result).
void CombineCycleVectors(const uint64_t* in, uint64_t* inout, size_t words,
                         LanePayloadReduce reduce);

}  // namespace lockstep
