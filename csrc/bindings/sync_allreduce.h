// The synchronous allreduce entry points of lockstep._core, run_allreduce (addresses,
// for torch) and run_allreduce_arrays (numpy arrays), as plain CPython fast calls.
#pragma once

#include <pybind11/pybind11.h>

namespace lockstep::bindings {

// After the enums are bound.
void BindSyncAllreduce(pybind11::module_& m);

}  // namespace lockstep::bindings
