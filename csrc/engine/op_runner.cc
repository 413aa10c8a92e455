#include "engine/op_runner.h"

namespace lockstep {

OpRunner::OpRunner(const Topology& topology, Backend& host_transport, PhaseRecorder& phases,
                   int64_t chunk_bytes)
    : host_(topology, host_transport, phases, chunk_bytes) {}

Collectives& OpRunner::CollectivesFor(const Response& response) {
  const bool carries_data =
      response.type != ResponseType::kBarrier && response.type != ResponseType::kJoin;
  if (response.device < 0 || !carries_data) return host_;
  throw Error("tensor '" + response.names.front() +
              "' is on a GPU, but lockstep has no GPU collectives to run it with");
}

std::vector<OpResult> OpRunner::Run(const Response& response,
                                    const std::vector<TensorEntry*>& entries) {
  std::vector<LocalTensor> tensors(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i] != nullptr) tensors[i].spec = &entries[i]->spec;
  }
  return CollectivesFor(response).Run(response, tensors);
}

}  // namespace lockstep
