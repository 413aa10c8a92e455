#include "engine/op_runner.h"

namespace lockstep {

OpRunner::OpRunner(const Topology& topology, Backend& host_transport, PhaseRecorder& phases,
                   int64_t chunk_bytes, const GpuCollectivesOptions& gpu,
                   PayloadLane::SpecLookup pending)
    : host_(topology, host_transport, phases, chunk_bytes),
      payload_lane_(topology, phases, std::move(pending)),
      gpu_options_(gpu) {
  gpu_options_.topology = topology;
  gpu_options_.host = &host_;
  gpu_options_.phases = &phases;
}

OpRunner::~OpRunner() = default;

Collectives& OpRunner::CollectivesFor(const Response& response,
                                      const std::vector<TensorEntry*>& entries) {
  const bool carries_data = response.type != ResponseType::kBarrier && !IsControl(response.type);
  if (response.device < 0 || !carries_data) return host_;
  if (!gpu_) {
    // Made collectively: every member of the set meets its first GPU response in the
    // same cycle. A rank that joined has no tensor here and uses its process's GPU.
    GpuCollectivesOptions options = gpu_options_;
    options.device = GpuDeviceFor(entries, join_device_, BoundGpuDevice());
    if (!gpu_failure_.empty()) throw Error(gpu_failure_);
    try {
      gpu_ = MakeGpuCollectives(options);
    } catch (const Error& e) {
      gpu_failure_ = e.what();
      throw;
    }
  }
  return *gpu_;
}

std::vector<OpResult> OpRunner::Run(const Response& response,
                                    const std::vector<TensorEntry*>& entries, const void* reduced) {
  std::vector<LocalTensor>& tensors = tensors_;
  tensors.assign(entries.size(), LocalTensor{});
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i] == nullptr) continue;
    tensors[i].spec = &entries[i]->spec;
    tensors[i].ready = entries[i]->ready_event.get();
  }
  if (reduced != nullptr) return payload_lane_.Finish(response, tensors, reduced);
  return CollectivesFor(response, entries).Run(response, tensors);
}

int OpRunner::GpuDeviceFor(const std::vector<TensorEntry*>& entries, int join_device, int bound) {
  for (const TensorEntry* entry : entries) {
    if (entry != nullptr) return entry->spec.device;
  }
  if (join_device >= 0) return join_device;
  return bound >= 0 ? bound : 0;
}

std::string OpRunner::Poll() { return gpu_ ? gpu_->Poll() : std::string(); }

}  // namespace lockstep
