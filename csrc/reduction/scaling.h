// Element-wise kernels on host buffers: scaling by pre/post factors (which also
// carries Average's division) and the reductions MPI cannot do natively (16-bit floats).
#pragma once

#include <cstdint>

#include "lockstep/types.h"

namespace lockstep {

// buffer[i] *= factor, with Horovod's arithmetic: float32 and float64 multiply in their
// own precision by the factor rounded to it; float16 and bfloat16 widen to float and
// multiply by float(factor); integers multiply in double, then truncate toward zero
// (saturating at the type's range, where Horovod's conversion is undefined).
void ScaleInPlace(void* buffer, int64_t count, DataType dtype, double factor);

// inout[i] = op(in[i], inout[i]) for float16/bfloat16, computed in float.
void ReduceSixteenBit(const void* in, void* inout, int64_t count, DataType dtype, ReduceOp op);
// The same with the accumulator read from `acc` and the result written to `out`.
void ReduceSixteenBit(const void* in, const void* acc, void* out, int64_t count, DataType dtype,
                      ReduceOp op);

}  // namespace lockstep
