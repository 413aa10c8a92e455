// The arithmetic of Adasum (Maleki et al., "Scaling Distributed Training with Adaptive
// Summation"), as Horovod's CPU implementation does it: two gradients a and b combine
// into (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b, which is their sum when they are
// orthogonal and their average when they are equal. Dot products and norms accumulate
// in double; a vector whose squared norm is below sqrt(DBL_MIN) keeps coefficient 1.
#pragma once

#include <cstdint>

#include "lockstep/types.h"

namespace lockstep {

// Partial sums over `count` elements of a and b: dot = a.b, a_sq = |a|^2, b_sq = |b|^2.
struct AdasumDots {
  double dot = 0.0;
  double a_sq = 0.0;
  double b_sq = 0.0;
};

// Adasum combines floating tensors only.
bool AdasumSupports(DataType dtype);

AdasumDots AdasumPartialDots(const void* a, const void* b, int64_t count, DataType dtype);

// The coefficient of a vector with squared norm `own_sq` given the full dot product.
double AdasumCoefficient(double dot, double own_sq);

// a[i] = a_coeff * a[i] + b_coeff * b[i]: in double for float32/float64 (as Horovod),
// in float for the 16-bit types.
void AdasumScaledAdd(void* a, const void* b, int64_t count, DataType dtype, double a_coeff,
                     double b_coeff);

}  // namespace lockstep
