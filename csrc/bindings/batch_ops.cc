// A DistributedOptimizer hands a bucket of gradients over at once. Building an OpSpec
// per gradient from Python (an object and a setter call per field) and waiting on each
// handle separately cost about 6 us per gradient; here each member is one tuple.
#include "bindings/batch_ops.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings/op_spec_args.h"
#include "lockstep/lockstep.h"

namespace py = pybind11;

namespace lockstep::bindings {
namespace {

// (name, dtype, shape, input address, output address, device, stream): one allreduce.
using AllreduceMember = std::tuple<std::string, DataType, std::vector<int64_t>, uintptr_t,
                                   uintptr_t, int32_t, uintptr_t>;

std::vector<Handle> SubmitAllreduces(std::vector<AllreduceMember> members, ReduceOp reduce_op,
                                     double prescale, double postscale, int32_t process_set_id,
                                     bool wake_background, bool grouped) {
  std::vector<OpSpec> specs;
  specs.reserve(members.size());
  for (auto& [name, dtype, shape, input, output, device, stream] : members) {
    specs.push_back(SpecFromArgs(OpType::kAllreduce, std::move(name), dtype, std::move(shape),
                                 input, output, reduce_op, prescale, postscale, /*root_rank=*/0,
                                 device, process_set_id, stream));
  }
  SubmitOptions options;
  options.grouped = grouped;
  options.wake_background = wake_background;
  return Submit(std::move(specs), std::move(options));
}

// Waits for every handle, even after one failed, so the core releases them all; then
// throws the first failure.
std::vector<OpResult> WaitAll(const std::vector<Handle>& handles) {
  std::vector<OpResult> results;
  results.reserve(handles.size());
  std::optional<Error> first_error;
  {
    py::gil_scoped_release release;
    for (Handle handle : handles) {
      try {
        results.push_back(Wait(handle));
      } catch (const Error& error) {
        if (!first_error) first_error = error;
        results.emplace_back();
      }
    }
  }
  if (first_error) throw *first_error;
  return results;
}

}  // namespace

void BindBatchOps(py::module_& m) {
  m.def("submit_allreduces", &SubmitAllreduces, py::arg("members"), py::arg("reduce_op"),
        py::arg("prescale"), py::arg("postscale"), py::arg("process_set_id"),
        py::arg("wake_background") = true, py::arg("grouped") = false);
  m.def("wait_all", &WaitAll, py::arg("handles"));
}

}  // namespace lockstep::bindings
