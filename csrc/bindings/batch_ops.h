// Entry points of lockstep._core for many ops at once: allreduces handed over in one
// call, independent (a DistributedOptimizer's bucket of gradients) or as a group, and
// one wait for all of them.
#pragma once

#include <pybind11/pybind11.h>

namespace lockstep::bindings {

// After the enums and OpResult are bound.
void BindBatchOps(pybind11::module_& m);

}  // namespace lockstep::bindings
