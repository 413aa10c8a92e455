// Element-wise reduction of one buffer into another, with the same semantics as the
// MPI ops lockstep uses (integers wrap, bool is any/all, float16/bfloat16 reduce in
// float and round per step), for collectives lockstep computes itself.
#pragma once

#include <cstdint>

#include "lockstep/types.h"

namespace lockstep {

// inout[i] = op(inout[i], in[i]) for `count` elements. Average reduces as Sum (the
// caller divides).
void ReduceInto(const void* in, void* inout, int64_t count, DataType dtype, ReduceOp op);

// out[i] = op(acc[i], in[i]): ReduceInto with the accumulator read from one buffer and
// the result written to another, which may be either input (saves a copy).
void ReduceTo(const void* in, const void* acc, void* out, int64_t count, DataType dtype,
              ReduceOp op);

// Whether reducing `ranks` contributions, each of which passes this check, gives the
// same bits whatever the order and grouping of the combinations and whichever correct
// kernel performs them (ReduceInto here, MPI's or a vendor's op elsewhere): so a
// reduction done another way (negotiation's payload lane) matches the data path's.
//  - Integers and bool: sums and products wrap modulo 2^n, and min, max, any and all
//    are exact; all are associative and commutative. Always true.
//  - Floating point Min/Max return one of their inputs, which any order finds, except
//    with NaN (which operand comes out differs between std::min, MPI's op and vector
//    min instructions) and with zeros (-0 and +0 compare equal but differ in bits).
//  - Floating point Sum/Average/Product round at every step, so the grouping changes
//    the result ((a + b) + c != a + (b + c)). With at most 2 ranks there is a single
//    combination, and IEEE a + b and a * b are exactly commutative, except for which
//    NaN's payload comes out. So: at most 2 ranks and no NaN.
bool ReducesExactlyInAnyOrder(const void* data, int64_t count, DataType dtype, ReduceOp op,
                              int ranks);

}  // namespace lockstep
