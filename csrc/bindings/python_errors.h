// The Python exception classes of lockstep._core and the translation of
// lockstep::Error into them, for pybind11's functions and the module's plain CPython
// ones alike.
#pragma once

#include <pybind11/pybind11.h>

#include "lockstep/values.h"

namespace lockstep::bindings {

// Adds LockstepError and its subclasses to `m` and registers the translation.
void BindErrors(pybind11::module_& m);
// Sets the Python error `error` surfaces as (BindErrors first).
void SetPythonError(const Error& error);

}  // namespace lockstep::bindings
