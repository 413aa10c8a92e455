// A small synchronous allreduce is a few microseconds in all, and pybind11's general
// dispatcher (argument vectors allocated per call, overload resolution, casters) was
// about a third of the core's share: callgrind counted ~6k of ~17k instructions per
// 4-byte op at one rank. These two entry points parse their positional arguments
// directly instead; lockstep.common.dispatch is their only caller.
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
  if (!PyUnicode_Check(object)) {
    PyErr_Format(PyExc_TypeError, "name must be a str, got %s", Py_TYPE(object)->tp_name);
    return false;
  }
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
PyObject* Run(OpSpec spec) {
  try {
    py::gil_scoped_release release;
    EnqueueAndWait(std::move(spec));
  } catch (const Error& e) {
    SetPythonError(e);
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// run_allreduce(name, dtype, shape, address, output_address, reduce_op, prescale,
//               postscale, device, process_set_id, stream)
PyObject* RunAllreduce(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (!CheckArgumentCount("run_allreduce", count, 11)) return nullptr;
  OpSpec spec;
  void* input = nullptr;
  if (!ReadString(args[0], &spec.name) || !g_dtypes.Read(args[1], &spec.dtype) ||
      !ReadShape(args[2], &spec.shape) || !ReadAddress(args[3], &input) ||
      !ReadAddress(args[4], &spec.output) || !g_reduce_ops.Read(args[5], &spec.reduce_op) ||
      !ReadDouble(args[6], &spec.prescale) || !ReadDouble(args[7], &spec.postscale) ||
      !ReadInt32(args[8], &spec.device) || !ReadInt32(args[9], &spec.process_set_id) ||
      !ReadAddress(args[10], &spec.stream)) {
    return nullptr;
  }
  spec.op = OpType::kAllreduce;
  spec.input = input;
  return Run(std::move(spec));
}

// run_allreduce_arrays(name, dtype, input, output, reduce_op, prescale, postscale,
//                      process_set_id): numpy's, with the arrays themselves rather than
// their addresses and shape, which cost the frontend two more calls per op. The caller
// has checked that `input` is C-contiguous and of `dtype`, and made `output` like it.
PyObject* RunAllreduceArrays(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (!CheckArgumentCount("run_allreduce_arrays", count, 8)) return nullptr;
  OpSpec spec;
  void* input = nullptr;
  Py_ssize_t input_bytes = 0, output_bytes = 0;
  if (!ReadString(args[0], &spec.name) || !g_dtypes.Read(args[1], &spec.dtype) ||
      !ReadContiguous(args[2], /*writable=*/false, &input, &input_bytes, &spec.shape) ||
      !ReadContiguous(args[3], /*writable=*/true, &spec.output, &output_bytes) ||
      !g_reduce_ops.Read(args[4], &spec.reduce_op) || !ReadDouble(args[5], &spec.prescale) ||
      !ReadDouble(args[6], &spec.postscale) || !ReadInt32(args[7], &spec.process_set_id)) {
    return nullptr;
  }
  if (input_bytes != output_bytes) {
    PyErr_SetString(PyExc_ValueError, "output must have the input's size");
    return nullptr;
  }
  spec.op = OpType::kAllreduce;
  spec.input = input;
  return Run(std::move(spec));
}

PyMethodDef g_methods[] = {
    {"run_allreduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&RunAllreduce)),
     METH_FASTCALL,
     "run_allreduce(name, dtype, shape, address, output_address, reduce_op, prescale, postscale, "
     "device, process_set_id, stream): the synchronous allreduce of memory at `address`."},
    {"run_allreduce_arrays",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&RunAllreduceArrays)),
     METH_FASTCALL,
     "run_allreduce_arrays(name, dtype, input, output, reduce_op, prescale, postscale, "
     "process_set_id): the synchronous allreduce of a C-contiguous array into `output`."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void BindSyncAllreduce(py::module_& m) {
  g_dtypes.Learn(m, "DataType");
  g_reduce_ops.Learn(m, "ReduceOp");
  if (PyModule_AddFunctions(m.ptr(), g_methods) != 0) throw py::error_already_set();
}

}  // namespace lockstep::bindings
