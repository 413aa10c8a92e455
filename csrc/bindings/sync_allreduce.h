// The synchronous allreduce's door of lockstep._core, run_allreduce (numpy arrays, or
// torch tensors by address), and set_allreduce_checks, as plain CPython fast calls.
#pragma once

#include <pybind11/pybind11.h>

namespace lockstep::bindings {

// After the enums are bound.
void BindSyncAllreduce(pybind11::module_& m);

}  // namespace lockstep::bindings
