// Element-wise kernels on host buffers: scaling by pre/post factors, the integer
// division behind Average, and the reductions MPI cannot do natively (16-bit floats).
#pragma once

#include <cstdint>

#include "lockstep/types.h"

namespace lockstep {

// buffer[i] *= factor. Integers compute in double, saturate at the type's range and
// truncate toward zero.
void ScaleInPlace(void* buffer, int64_t count, DataType dtype, double factor);

// buffer[i] /= divisor with C++ integer semantics (truncation), exact for int64.
void DivideIntegersInPlace(void* buffer, int64_t count, DataType dtype, int64_t divisor);

// inout[i] = op(in[i], inout[i]) for float16/bfloat16, computed in float.
void ReduceSixteenBit(const void* in, void* inout, int64_t count, DataType dtype, ReduceOp op);

}  // namespace lockstep
