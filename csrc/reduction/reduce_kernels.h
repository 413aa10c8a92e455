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

}  // namespace lockstep
