// Builds without the NCCL backend: GPU tensors are refused at submission (with
// QueryNcclInfo's reason), so nothing here is reached by a well-formed job; the
// functions still answer with that reason rather than assume it.
#include "backends/gpu_collectives.h"

#include "backends/gpu_info.h"

namespace lockstep {

std::string GpuUnavailableReason(const Config&) { return QueryNcclInfo().problem; }

std::shared_ptr<GpuEvent> RecordGpuInputReady(const OpSpec& spec) {
  throw Error(std::string(OpTypeName(spec.op)) + " of tensor '" + spec.name +
                  "': the tensor is on GPU " + std::to_string(spec.device) + ", but " +
                  QueryNcclInfo().problem,
              Status::Code::kInvalidArgument);
}

std::unique_ptr<Collectives> MakeGpuCollectives(const GpuCollectivesOptions&) {
  throw Error("GPU collectives cannot run: " + QueryNcclInfo().problem);
}

void GpuStreamWaitDone(const GpuEvent&, void*) {
  throw Error("internal error: a device result without a GPU backend: " + QueryNcclInfo().problem);
}

int BoundGpuDevice() { return -1; }

void* GpuStreamOf(int, int32_t) { return nullptr; }

}  // namespace lockstep
