// pybind11 module lockstep._core: a thin layer over include/lockstep/lockstep.h.
// Tensors cross as raw addresses plus dtype and shape, so every frontend (NumPy,
// torch, TensorFlow, JAX) shares one binding; frontends keep the memory alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bindings/batch_ops.h"
#include "bindings/python_errors.h"
#include "bindings/sync_allreduce.h"
#include "lockstep/lockstep.h"

namespace py = pybind11;
using namespace lockstep;
using lockstep::bindings::BindBatchOps;
using lockstep::bindings::BindErrors;
using lockstep::bindings::BindSyncAllreduce;

namespace {

void BindEnums(py::module_& m) {
  py::enum_<DataType>(m, "DataType")
      .value("UINT8", DataType::kUInt8)
      .value("INT8", DataType::kInt8)
      .value("INT16", DataType::kInt16)
      .value("INT32", DataType::kInt32)
      .value("INT64", DataType::kInt64)
      .value("FLOAT16", DataType::kFloat16)
      .value("BFLOAT16", DataType::kBFloat16)
      .value("FLOAT32", DataType::kFloat32)
      .value("FLOAT64", DataType::kFloat64)
      .value("BOOL", DataType::kBool)
      .value("UINT16", DataType::kUInt16);
  py::enum_<ReduceOp>(m, "ReduceOp")
      .value("AVERAGE", ReduceOp::kAverage)
      .value("SUM", ReduceOp::kSum)
      .value("ADASUM", ReduceOp::kAdasum)
      .value("MIN", ReduceOp::kMin)
      .value("MAX", ReduceOp::kMax)
      .value("PRODUCT", ReduceOp::kProduct);
  py::enum_<OpType>(m, "OpType")
      .value("ALLREDUCE", OpType::kAllreduce)
      .value("ALLGATHER", OpType::kAllgather)
      .value("BROADCAST", OpType::kBroadcast)
      .value("ALLTOALL", OpType::kAlltoall)
      .value("REDUCESCATTER", OpType::kReducescatter)
      .value("BARRIER", OpType::kBarrier)
      .value("JOIN", OpType::kJoin);
}

void BindOpSpec(py::module_& m) {
  py::class_<OpSpec>(m, "OpSpec")
      .def(py::init<>())
      .def_readwrite("op", &OpSpec::op)
      .def_readwrite("name", &OpSpec::name)
      .def_readwrite("dtype", &OpSpec::dtype)
      .def_readwrite("shape", &OpSpec::shape)
      .def_property(
          "input", [](const OpSpec& s) { return reinterpret_cast<uintptr_t>(s.input); },
          [](OpSpec& s, uintptr_t address) { s.input = reinterpret_cast<const void*>(address); })
      .def_property(
          "output", [](const OpSpec& s) { return reinterpret_cast<uintptr_t>(s.output); },
          [](OpSpec& s, uintptr_t address) { s.output = reinterpret_cast<void*>(address); })
      .def_readwrite("reduce_op", &OpSpec::reduce_op)
      .def_readwrite("prescale", &OpSpec::prescale)
      .def_readwrite("postscale", &OpSpec::postscale)
      .def_readwrite("root_rank", &OpSpec::root_rank)
      .def_readwrite("splits", &OpSpec::splits)
      .def_readwrite("device", &OpSpec::device)
      .def_readwrite("process_set_id", &OpSpec::process_set_id)
      // The framework's cudaStream_t as an integer (torch: stream.cuda_stream); 0 is
      // CUDA's legacy default stream.
      .def_property(
          "stream", [](const OpSpec& s) { return reinterpret_cast<uintptr_t>(s.stream); },
          [](OpSpec& s, uintptr_t stream) { s.stream = reinterpret_cast<void*>(stream); });
}

void BindResult(py::module_& m) {
  // The buffer protocol hands the core-allocated output to NumPy/torch zero-copy; the
  // consumer's reference to this object keeps the memory alive.
  py::class_<OpResult>(m, "Result", py::buffer_protocol())
      .def_readonly("shape", &OpResult::shape)
      .def_readonly("received_splits", &OpResult::received_splits)
      .def_readonly("join_last_rank", &OpResult::join_last_rank)
      .def_property_readonly("has_buffer", [](const OpResult& r) { return r.buffer != nullptr; })
      // Where the buffer lives: -1 host, else the CUDA device. A device result is read
      // through data_ptr/nbytes (the frontend copies it into its own tensor on the op's
      // stream, then drops this object; the memory is freed stream-ordered after that).
      .def_readonly("device", &OpResult::device)
      // Device ops: lockstep's done event and the stream the op was submitted on. wait()
      // already made that stream wait on the event; a frontend that uses the result on
      // another stream orders it with order_stream(stream) first.
      .def_property_readonly("has_gpu_done",
                             [](const OpResult& r) { return r.gpu_done != nullptr; })
      .def_property_readonly(
          "gpu_stream", [](const OpResult& r) { return reinterpret_cast<uintptr_t>(r.gpu_stream); })
      .def(
          "order_stream",
          [](const OpResult& r, uintptr_t stream) {
            OrderStreamAfter(r, reinterpret_cast<void*>(stream));
          },
          py::arg("stream"))
      .def_property_readonly(
          "data_ptr",
          [](const OpResult& r) {
            return reinterpret_cast<uintptr_t>(r.buffer ? r.buffer->data() : nullptr);
          })
      .def_property_readonly("nbytes",
                             [](const OpResult& r) { return r.buffer ? r.buffer->size() : 0; })
      .def_buffer([](OpResult& r) -> py::buffer_info {
        if (r.device >= 0) {
          throw py::buffer_error("the result is in GPU memory (device " + std::to_string(r.device) +
                                 "); read it through data_ptr");
        }
        void* data = r.buffer ? r.buffer->data() : nullptr;
        auto size = static_cast<py::ssize_t>(r.buffer ? r.buffer->size() : 0);
        return py::buffer_info(data, 1, py::format_descriptor<uint8_t>::format(), 1, {size},
                               {py::ssize_t{1}});
      });
}

// An uninitialized C-contiguous array in host memory the core allocated: large ones
// come recycled from the core's cache of freed buffers, and go back there when the
// last array viewing them goes (the array's base, a capsule, owns the Buffer). One
// call, where a Python-level wrapper around np.frombuffer cost 4 us per array.
py::array EmptyArray(const py::dtype& dtype, const std::vector<py::ssize_t>& shape) {
  size_t count = 1;
  for (py::ssize_t extent : shape) {
    if (extent < 0) throw py::value_error("negative dimensions are not allowed");
    count *= static_cast<size_t>(extent);
  }
  auto* buffer = new Buffer(count * static_cast<size_t>(dtype.itemsize()));
  py::capsule owner(buffer, [](void* p) { delete static_cast<Buffer*>(p); });
  return py::array(dtype, shape, buffer->data(), owner);
}

void BindMessages(py::module_& m) {
  m.attr("BOOL_AVERAGE_ERROR") = kBoolAverageError;
  m.attr("BOOL_SCALE_ERROR") = kBoolScaleError;
}

void BindHostBuffer(py::module_& m) {
  m.attr("RECYCLED_HOST_BUFFER_BYTES") = kRecycledHostBufferBytes;
  m.def("empty_array", &EmptyArray, py::arg("dtype"), py::arg("shape"));
}

Topology Topo() { return GetTopology(); }

// Small ops are often done by the time the caller waits; handing the GIL back and
// forth would then cost more than the op itself.
OpResult WaitReleasingGil(Handle handle) {
  if (Poll(handle)) return Wait(handle);
  py::gil_scoped_release release;
  return Wait(handle);
}

std::vector<Handle> SubmitSpecs(std::vector<OpSpec> specs, bool grouped, bool wake_background) {
  SubmitOptions options;
  options.grouped = grouped;
  options.wake_background = wake_background;
  return Submit(std::move(specs), std::move(options));
}

// The data address of any object exporting a contiguous buffer (numpy arrays,
// including ml_dtypes' bfloat16). Several times cheaper than numpy's
// __array_interface__, and it runs on every op.
uintptr_t BufferAddress(py::handle object) {
  Py_buffer view;
  if (PyObject_GetBuffer(object.ptr(), &view, PyBUF_ANY_CONTIGUOUS) != 0) {
    throw py::error_already_set();
  }
  auto address = reinterpret_cast<uintptr_t>(view.buf);
  PyBuffer_Release(&view);
  return address;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "lockstep core: MPI background thread, negotiation, fusion and collectives";
  BindErrors(m);
  BindEnums(m);
  BindOpSpec(m);
  BindResult(m);
  BindHostBuffer(m);
  BindMessages(m);

  m.def("init", &Init, py::call_guard<py::gil_scoped_release>());
  m.def("shutdown", &Shutdown, py::call_guard<py::gil_scoped_release>());
  m.def("is_initialized", &IsInitialized);
  m.def("can_recover_in_process", &CanRecoverInProcess);
  m.def("every_process_alive", &EveryProcessAlive, py::call_guard<py::gil_scoped_release>());
  m.def("recover_with_survivors", &RecoverWithSurvivors, py::call_guard<py::gil_scoped_release>());
  m.def("not_running_reason", &NotRunningReason);
  m.def("rank", [] { return Topo().rank; });
  m.def("size", [] { return Topo().size; });
  m.def("local_rank", [] { return Topo().local_rank; });
  m.def("local_size", [] { return Topo().local_size; });
  m.def("cross_rank", [] { return Topo().cross_rank; });
  m.def("cross_size", [] { return Topo().cross_size; });
  m.def("hostnames", &Hostnames);
  m.def("mpi_threads_supported", &MpiThreadsSupported);
  m.def("mpi_built", &MpiBuilt);
  m.def("nccl_built", &NcclBuilt);
  m.def("nccl_info", [] {
    NcclInfo info = GetNcclInfo();
    py::dict out;
    out["built_version"] = info.built_version;
    out["runtime_version"] = info.runtime_version;
    out["library_path"] = info.library_path;
    out["source"] = info.source;
    out["cuda_devices"] = info.cuda_devices;
    out["problem"] = info.problem;
    return out;
  });
  m.def("mpi_info", [] {
    MpiInfo info = GetMpiInfo();
    py::dict out;
    out["source"] = info.source;
    out["built_version"] = info.built_version;
    out["built_library"] = info.built_library;
    out["built_launcher"] = info.built_launcher;
    out["built_with_ulfm"] = info.built_with_ulfm;
    out["library_has_ulfm"] = info.library_has_ulfm;
    out["library_version"] = info.library_version;
    out["library_path"] = info.library_path;
    return out;
  });
  m.def("engine_stats", [] {
    EngineStats stats = GetEngineStats();
    py::dict out;
    out["cycles"] = stats.cycles;
    out["full_rounds"] = stats.full_rounds;
    out["cached_responses"] = stats.cached_responses;
    out["negotiated_responses"] = stats.negotiated_responses;
    return out;
  });
  m.def("start_timeline", &StartTimeline, py::arg("path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", &StopTimeline);

  m.def("buffer_address", &BufferAddress, py::arg("object"));
  // The core's two ways in (lockstep.h): submit (handles for poll/wait) and run (one op,
  // start to end, waiting without the GIL). The allreduce has its own door below.
  m.def("submit", &SubmitSpecs, py::arg("specs"), py::arg("grouped") = false,
        py::arg("wake_background") = true);
  m.def("run", &Run, py::arg("spec"), py::call_guard<py::gil_scoped_release>());
  // The argument checks Submit and Run make, for a frontend that must refuse an op
  // before it runs (lockstep.common.validation.check_op).
  m.def("check_op_arguments", &CheckOpArguments, py::arg("spec"), py::arg("set_size"),
        py::arg("world_size"), py::arg("rank_known") = true);
  BindSyncAllreduce(m);  // run_allreduce, set_allreduce_checks
  BindBatchOps(m);       // submit_allreduces, wait_all
  m.def(
      "gpu_stream",
      [](int device, int32_t process_set_id) {
        return reinterpret_cast<uintptr_t>(GpuStream(device, process_set_id));
      },
      py::arg("device"), py::arg("process_set_id") = 0);
  m.def("auto_name", &AutoName, py::arg("kind"), py::arg("process_set_id") = 0);
  // Collective over all ranks: waits for the others without the GIL.
  m.def("add_process_set", &AddProcessSet, py::arg("ranks"),
        py::call_guard<py::gil_scoped_release>());
  m.def("remove_process_set", &RemoveProcessSet, py::arg("process_set_id"),
        py::call_guard<py::gil_scoped_release>());
  m.def("process_set_ids", &ProcessSetIds);
  m.def("process_set_ranks", &ProcessSetRanks, py::arg("process_set_id"));
  m.def("poll", &Poll, py::arg("handle"));
  m.def("wait", &WaitReleasingGil, py::arg("handle"));
}
