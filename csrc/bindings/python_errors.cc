#include "bindings/python_errors.h"

#include <exception>
#include <string>

namespace py = pybind11;

namespace lockstep::bindings {
namespace {

// The classes BindErrors made; they live as long as the module.
struct ErrorTypes {
  PyObject* base = nullptr;
  PyObject* invalid = nullptr;
  PyObject* precondition = nullptr;
  PyObject* aborted = nullptr;
  PyObject* unsupported = nullptr;
  PyObject* unimplemented = nullptr;
};
ErrorTypes g_types;

// A new exception class `name` in module `m` deriving from `bases`.
PyObject* NewException(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = std::string(PyModule_GetName(m.ptr())) + "." + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));  // the module keeps the class alive
  return type;
}

}  // namespace

// lockstep::Error surfaces as LockstepError (a RuntimeError) or, by its code, a
// subclass that is also the Python type Horovod raises in that situation, so code
// written against Horovod catches it: InvalidArgumentError and UnsupportedOperationError
// are also ValueErrors, UnimplementedError a NotImplementedError.
void BindErrors(py::module_& m) {
  PyObject* base = NewException(m, "LockstepError", py::make_tuple(py::handle(PyExc_RuntimeError)),
                                "A collective or argument failed; the message says why.");
  PyObject* invalid = NewException(
      m, "InvalidArgumentError", py::make_tuple(py::handle(base), py::handle(PyExc_ValueError)),
      "A bad argument, e.g. a name submitted again while its collective is in flight.");
  PyObject* precondition =
      NewException(m, "PreconditionError", py::make_tuple(py::handle(base)),
                   "The ranks disagree about a collective (shape, dtype, op, ...).");
  PyObject* aborted = NewException(m, "AbortedError", py::make_tuple(py::handle(base)),
                                   "A collective failed across ranks or did not run.");
  PyObject* unsupported = NewException(
      m, "UnsupportedOperationError",
      py::make_tuple(py::handle(base), py::handle(PyExc_ValueError)),
      "A reduce op or argument combination the op does not support. Horovod reports some of "
      "these from its core (a RuntimeError) and some from Python (a ValueError); this is both.");
  PyObject* unimplemented =
      NewException(m, "UnimplementedError",
                   py::make_tuple(py::handle(base), py::handle(PyExc_NotImplementedError)),
                   "What Horovod does not implement either and refuses with NotImplementedError, "
                   "e.g. Adasum on a number of ranks that is not a power of 2.");
  g_types = {base, invalid, precondition, aborted, unsupported, unimplemented};
  py::register_exception_translator([](std::exception_ptr thrown) {
    if (!thrown) return;
    try {
      std::rethrow_exception(thrown);
    } catch (const Error& e) {
      SetPythonError(e);
    }
  });
}

void SetPythonError(const Error& error) {
  PyObject* type = g_types.base;
  switch (error.code()) {
    case Status::Code::kInvalidArgument:
      type = g_types.invalid;
      break;
    case Status::Code::kPrecondition:
      type = g_types.precondition;
      break;
    case Status::Code::kAborted:
      type = g_types.aborted;
      break;
    case Status::Code::kUnsupported:
      type = g_types.unsupported;
      break;
    case Status::Code::kUnimplemented:
      type = g_types.unimplemented;
      break;
    default:
      break;
  }
  PyErr_SetString(type, error.what());
}

}  // namespace lockstep::bindings
