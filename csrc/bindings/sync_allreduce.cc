// The synchronous allreduce's one door, lockstep._core.run_allreduce: every frontend's
// blocking allreduce (numpy arrays, torch tensors by address) comes here with the
// user's own arguments. A small op is a few microseconds in all, so this parses its
// positional arguments directly (pybind11's general dispatcher, with argument vectors
// allocated per call, overload resolution and casters, was about a third of the
// core's share: callgrind counted ~6k of ~17k instructions per 4-byte op at one rank),
// and decides itself whether the call is plain (a reduce op by its constant, no
// scaling, a name or None). Anything else goes to the one Python converter the
// frontends share (lockstep.common.dispatch registers it), which raises the TypeErrors
// and ValueErrors of values Python cannot hand over, or returns the converted
// arguments. Their values (Adasum's set size, bool reductions...) are checked by the
// core's ValidateSpec in Run, as on every other entry point.
#include "bindings/sync_allreduce.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bindings/python_errors.h"
#include "lockstep/lockstep.h"

namespace py = pybind11;

namespace lockstep::bindings {
namespace {

// Argument readers: false with a Python error set.
bool ReadString(PyObject* object, std::string* out) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(object, &size);
  if (data == nullptr) return false;
  out->assign(data, static_cast<size_t>(size));
  return true;
}

// Reads a bound enum's value. The frontends pass the enum's members, which live as
// long as the module, so those are recognized by identity: pybind11's caster cost
// about 900 instructions per argument. Anything else goes through the caster.
template <typename Enum>
class EnumReader {
 public:
  void Learn(const py::module_& m, const char* name) {
    name_ = name;
    py::dict members = m.attr(name).attr("__members__");
    for (auto item : members) members_.emplace_back(item.second.ptr(), item.second.cast<Enum>());
  }
  bool Read(PyObject* object, Enum* out) const {
    for (const auto& [member, value] : members_) {
      if (member == object) {
        *out = value;
        return true;
      }
    }
    py::detail::make_caster<Enum> caster;
    if (!caster.load(object, /*convert=*/false)) {
      PyErr_Format(PyExc_TypeError, "expected a lockstep._core.%s, got %s", name_,
                   Py_TYPE(object)->tp_name);
      return false;
    }
    *out = py::detail::cast_op<Enum>(std::move(caster));
    return true;
  }

 private:
  const char* name_ = "";
  std::vector<std::pair<PyObject*, Enum>> members_;
};

EnumReader<DataType> g_dtypes;
EnumReader<ReduceOp> g_reduce_ops;

bool ReadDouble(PyObject* object, double* out) {
  *out = PyFloat_AsDouble(object);
  return !(*out == -1.0 && PyErr_Occurred());
}

bool ReadInt64(PyObject* object, int64_t* out) {
  *out = PyLong_AsLongLong(object);
  return !(*out == -1 && PyErr_Occurred());
}

bool ReadInt32(PyObject* object, int32_t* out) {
  int64_t value = 0;
  if (!ReadInt64(object, &value)) return false;
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    PyErr_SetString(PyExc_OverflowError, "value out of range for a 32-bit integer");
    return false;
  }
  *out = static_cast<int32_t>(value);
  return true;
}

bool ReadAddress(PyObject* object, void** out) {
  const unsigned long long value = PyLong_AsUnsignedLongLong(object);
  if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
  *out = reinterpret_cast<void*>(static_cast<uintptr_t>(value));
  return true;
}

bool ReadShapeItems(PyObject* const* items, Py_ssize_t rank, std::vector<int64_t>* out) {
  out->resize(static_cast<size_t>(rank));
  for (Py_ssize_t i = 0; i < rank; ++i) {
    if (!ReadInt64(items[i], &(*out)[static_cast<size_t>(i)])) return false;
  }
  return true;
}

// A shape from a tuple (numpy's shape, torch.Size) or any sequence of ints. Tuple
// subclasses are read in place: PySequence_Fast copies anything but an exact tuple or
// list into a new list, which was about 100 ns of every torch op (torch.Size).
bool ReadShape(PyObject* object, std::vector<int64_t>* out) {
  if (PyTuple_Check(object)) {
    return ReadShapeItems(reinterpret_cast<PyTupleObject*>(object)->ob_item,
                          PyTuple_GET_SIZE(object), out);
  }
  PyObject* sequence = PySequence_Fast(object, "shape must be a sequence of ints");
  if (sequence == nullptr) return false;
  const bool ok =
      ReadShapeItems(PySequence_Fast_ITEMS(sequence), PySequence_Fast_GET_SIZE(sequence), out);
  Py_DECREF(sequence);
  return ok;
}

// A C-contiguous buffer's memory (and shape, when asked), for as long as its owner
// keeps it alive.
bool ReadContiguous(PyObject* object, bool writable, void** data, Py_ssize_t* bytes,
                    std::vector<int64_t>* shape = nullptr) {
  Py_buffer view;
  const int flags = PyBUF_ND | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(object, &view, flags) != 0) return false;
  *data = view.buf;
  *bytes = view.len;
  if (shape != nullptr) shape->assign(view.shape, view.shape + view.ndim);
  PyBuffer_Release(&view);
  return true;
}

bool CheckArgumentCount(const char* function, Py_ssize_t given, Py_ssize_t expected) {
  if (given == expected) return true;
  PyErr_Format(PyExc_TypeError, "%s takes %zd positional arguments (%zd given)", function, expected,
               given);
  return false;
}

// Runs the op without the GIL and returns None, or nullptr with the error set.
PyObject* RunReleasingGil(OpSpec spec) {
  try {
    py::gil_scoped_release release;
    lockstep::Run(std::move(spec));
  } catch (const Error& e) {
    SetPythonError(e);
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// Set by set_allreduce_checks; the module keeps them for the process's lifetime.
struct Checks {
  PyObject* check = nullptr;     // (dtype, op, prescale, postscale, name, ps) -> checked 4-tuple
  PyObject* name_for = nullptr;  // (kind, None, ps) -> the next automatic name
  PyObject* kind = nullptr;      // "allreduce"
};
Checks g_checks;

// The reduce op of a plain call: one of Horovod's constants as an exact int, Adasum
// apart (it needs the process set's size). False: not plain, no error set.
bool PlainReduceOp(PyObject* object, ReduceOp* out) {
  if (!PyLong_CheckExact(object)) return false;
  const long value = PyLong_AsLong(object);
  if (value < 0 || value > static_cast<long>(ReduceOp::kProduct) ||
      value == static_cast<long>(ReduceOp::kAdasum)) {
    PyErr_Clear();  // an int too large for a long is not plain either
    return false;
  }
  *out = static_cast<ReduceOp>(value);
  return true;
}

bool IsUnscaled(PyObject* object) {
  return PyFloat_CheckExact(object) && PyFloat_AS_DOUBLE(object) == 1.0;
}

// The arguments the checker vouched for: (core reduce op, prescale, postscale, name).
bool ReadChecked(PyObject* checked, OpSpec* spec) {
  if (!PyTuple_Check(checked) || PyTuple_GET_SIZE(checked) != 4) {
    PyErr_SetString(PyExc_TypeError, "the allreduce checker must return a 4-tuple");
    return false;
  }
  return g_reduce_ops.Read(PyTuple_GET_ITEM(checked, 0), &spec->reduce_op) &&
         ReadDouble(PyTuple_GET_ITEM(checked, 1), &spec->prescale) &&
         ReadDouble(PyTuple_GET_ITEM(checked, 2), &spec->postscale) &&
         ReadString(PyTuple_GET_ITEM(checked, 3), &spec->name);
}

// Fills the spec's reduction and name from the user's arguments: directly when the
// call is plain, else through the checker (which raises what is wrong).
bool ReadReduction(PyObject* const* args, PyObject* ps, OpSpec* spec) {
  PyObject* name = args[0];
  PyObject* op = args[5];
  const bool plain = spec->dtype != DataType::kBool && PlainReduceOp(op, &spec->reduce_op) &&
                     IsUnscaled(args[6]) && IsUnscaled(args[7]);
  if (g_checks.check == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "run_allreduce: lockstep.common.dispatch is not imported");
    return false;
  }
  if (plain && PyUnicode_CheckExact(name) && PyUnicode_GET_LENGTH(name) > 0) {
    return ReadString(name, &spec->name);
  }
  if (plain && name == Py_None) {  // the automatic name, without the checker's other work
    PyObject* call[] = {g_checks.kind, Py_None, ps};
    PyObject* chosen = PyObject_Vectorcall(g_checks.name_for, call, 3, nullptr);
    if (chosen == nullptr) return false;
    const bool ok = PyUnicode_Check(chosen) && ReadString(chosen, &spec->name);
    Py_DECREF(chosen);
    return ok;
  }
  PyObject* call[] = {args[1], op, args[6], args[7], name, ps};
  PyObject* checked = PyObject_Vectorcall(g_checks.check, call, 6, nullptr);
  if (checked == nullptr) return false;
  const bool ok = ReadChecked(checked, spec);
  Py_DECREF(checked);
  return ok;
}

// The memory: addresses and a shape (torch), or objects exporting C-contiguous buffers
// (numpy arrays; `shape` is then None and read from `input`, and `output` must have
// the input's size).
bool ReadMemory(PyObject* const* args, OpSpec* spec) {
  PyObject* shape = args[2];
  PyObject* input = args[3];
  PyObject* output = args[4];
  void* data = nullptr;
  if (PyLong_Check(input)) {
    if (!ReadShape(shape, &spec->shape) || !ReadAddress(input, &data) ||
        !ReadAddress(output, &spec->output)) {
      return false;
    }
    spec->input = data;
    return true;
  }
  Py_ssize_t input_bytes = 0, output_bytes = 0;
  if (!ReadContiguous(input, /*writable=*/false, &data, &input_bytes, &spec->shape) ||
      !ReadContiguous(output, /*writable=*/true, &spec->output, &output_bytes)) {
    return false;
  }
  if (input_bytes != output_bytes) {
    PyErr_SetString(PyExc_ValueError, "output must have the input's size");
    return false;
  }
  spec->input = data;
  return true;
}

// run_allreduce(name, dtype, shape, input, output, op, prescale, postscale,
//               process_set_id, device, stream)
PyObject* RunAllreduce(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (!CheckArgumentCount("run_allreduce", count, 11)) return nullptr;
  OpSpec spec;
  spec.op = OpType::kAllreduce;
  if (!g_dtypes.Read(args[1], &spec.dtype) || !ReadMemory(args, &spec) ||
      !ReadInt32(args[8], &spec.process_set_id) || !ReadInt32(args[9], &spec.device) ||
      !ReadAddress(args[10], &spec.stream) || !ReadReduction(args, args[8], &spec)) {
    return nullptr;
  }
  return RunReleasingGil(std::move(spec));
}

// set_allreduce_checks(check, name_for): see Checks.
PyObject* SetAllreduceChecks(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (!CheckArgumentCount("set_allreduce_checks", count, 2)) return nullptr;
  if (!PyCallable_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "set_allreduce_checks takes two callables");
    return nullptr;
  }
  if (g_checks.kind == nullptr) g_checks.kind = PyUnicode_InternFromString("allreduce");
  Py_INCREF(args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(g_checks.check, args[0]);
  Py_XSETREF(g_checks.name_for, args[1]);
  Py_RETURN_NONE;
}

template <typename Function>
PyCFunction Fast(Function function) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(function));
}

PyMethodDef g_methods[] = {
    {"run_allreduce", Fast(&RunAllreduce), METH_FASTCALL,
     "run_allreduce(name, dtype, shape, input, output, op, prescale, postscale, process_set_id, "
     "device, stream): the synchronous allreduce, with the user's op, scale factors and name "
     "(None: automatic). input/output: addresses (with shape), or C-contiguous buffers (shape "
     "None)."},
    {"set_allreduce_checks", Fast(&SetAllreduceChecks), METH_FASTCALL,
     "set_allreduce_checks(check, name_for): what run_allreduce calls for arguments that are "
     "not plain, and for an automatic name."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void BindSyncAllreduce(py::module_& m) {
  g_dtypes.Learn(m, "DataType");
  g_reduce_ops.Learn(m, "ReduceOp");
  if (PyModule_AddFunctions(m.ptr(), g_methods) != 0) throw py::error_already_set();
}

}  // namespace lockstep::bindings
