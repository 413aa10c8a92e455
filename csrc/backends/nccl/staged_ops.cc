#include "backends/nccl/staged_ops.h"

#include "fusion/device_layout.h"

namespace lockstep {
namespace {

int64_t InputBytes(const Response& r, size_t i, const OpSpec& spec) {
  const int64_t element = static_cast<int64_t>(DataTypeSize(r.dtype));
  if (r.type == ResponseType::kAllreduce) return r.sizes[i] * element;
  int64_t elements = 1;
  for (int64_t d : spec.shape) elements *= d;
  return elements * element;
}

}  // namespace

std::vector<OpResult> StagedOps::Run(const Response& r, const std::vector<LocalTensor>& tensors) {
  cudaStream_t stream = stream_->get();
  std::vector<int64_t> bytes(tensors.size(), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].spec != nullptr) bytes[i] = InputBytes(r, i, *tensors[i].spec);
  }
  const DeviceFusionLayout layout = PlanDeviceFusion(bytes);
  char* pinned = pinned_.Get(layout.total_bytes, stream, r.names);

  // Host copies of this rank's tensors; allreduce and broadcast work in place on them.
  phases_.Mark(stream, "MEMCPY_IN_HOST_STAGING");
  std::vector<OpSpec> host_specs(tensors.size());
  std::vector<LocalTensor> host_tensors(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].spec == nullptr) continue;
    char* slot = pinned + layout.offsets[i];
    if (bytes[i] > 0) {
      CheckCuda(
          cudaMemcpyAsync(slot, tensors[i].spec->input, bytes[i], cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync to the host staging buffer", r.names);
    }
    host_specs[i] = *tensors[i].spec;
    host_specs[i].input = slot;
    host_specs[i].output = slot;
    host_specs[i].device = -1;
    host_specs[i].stream = nullptr;
    host_tensors[i].spec = &host_specs[i];
  }
  // The GPU idles from here while the host collective runs (it marks its own phases).
  phases_.Mark(stream, "HOST_COLLECTIVE");
  CheckCuda(cudaStreamSynchronize(stream), "stream synchronization before staging", r.names);
  std::vector<OpResult> results = host_.Run(r, host_tensors);
  phases_.Mark(stream, "MEMCPY_OUT_HOST_STAGING");

  for (size_t i = 0; i < tensors.size(); ++i) {
    const OpSpec* spec = tensors[i].spec;
    if (spec == nullptr) continue;
    OpResult& result = results[i];
    if (result.buffer == nullptr) {  // allreduce, broadcast: the result is in the slot
      if (bytes[i] > 0) {
        CheckCuda(cudaMemcpyAsync(spec->output, pinned + layout.offsets[i], bytes[i],
                                  cudaMemcpyHostToDevice, stream),
                  "cudaMemcpyAsync from the host staging buffer", r.names);
      }
      continue;
    }
    // A core-allocated result: into device memory. From pageable memory the copy
    // returns once CUDA has taken the bytes, so the host buffer may go right after.
    std::shared_ptr<Buffer> device =
        DeviceResult(static_cast<int64_t>(result.buffer->size()), stream_, spec->stream, r.names);
    if (result.buffer->size() > 0) {
      CheckCuda(cudaMemcpyAsync(device->data(), result.buffer->data(), result.buffer->size(),
                                cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync of the result to the device", r.names);
    }
    result.buffer = std::move(device);
    result.device = stream_->device();
  }
  return results;
}

}  // namespace lockstep
