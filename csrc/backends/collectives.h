// The seam between the engine and the memory a response's tensors live in: "run one
// planned response on memory of my kind". HostCollectives (backends/host/) packs,
// scales and chunks host memory and calls a transport (backends/backend.h: MPI,
// shared memory); the GPU collectives (backends/gpu_collectives.h) do the same on the
// device with NCCL. The op runner only picks one by the response's device.
#pragma once

#include <string>
#include <vector>

#include "lockstep/values.h"
#include "wire/message.h"

namespace lockstep {

class GpuEvent;  // backends/gpu_collectives.h; opaque above the GPU backend

// This rank's tensor in a response. spec == nullptr: this rank has joined and
// contributes zeros (allreduce) or nothing.
struct LocalTensor {
  const OpSpec* spec = nullptr;
  // Device tensors: the event recorded on the producer's stream at enqueue, which
  // the collective's stream waits on before it touches the data. Null for host tensors.
  const GpuEvent* ready = nullptr;
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  // tensors[i] is this rank's tensor for response.names[i]. Returns one result per
  // name; throws Error (naming the tensors) if the collective fails.
  virtual std::vector<OpResult> Run(const Response& response,
                                    const std::vector<LocalTensor>& tensors) = 0;
  // Called once per cycle: a failure that surfaced since (an asynchronous NCCL error,
  // a timed-out collective), as a message naming the tensors; empty if none.
  virtual std::string Poll() { return ""; }
};

}  // namespace lockstep
