// Runs one planned response on this rank by handing it to the collectives of the
// memory its tensors live in. Host memory only so far (HostCollectives: MPI and
// shared memory); barrier and join carry no data and run on the host path.
#pragma once

#include <vector>

#include "backends/host/host_collectives.h"
#include "engine/tensor_queue.h"
#include "wire/message.h"

namespace lockstep {

class OpRunner {
 public:
  OpRunner(const Topology& topology, Backend& host_transport, PhaseRecorder& phases,
           int64_t chunk_bytes);

  // entries[i] is this rank's tensor for response.names[i], or nullptr when this rank
  // has joined. Returns one result per name; throws Error if the collective fails.
  std::vector<OpResult> Run(const Response& response, const std::vector<TensorEntry*>& entries);
  void set_chunk_bytes(int64_t chunk_bytes) { host_.set_chunk_bytes(chunk_bytes); }

 private:
  Collectives& CollectivesFor(const Response& response);

  HostCollectives host_;
};

}  // namespace lockstep
