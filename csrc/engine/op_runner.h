// Runs one planned response on this rank by handing it to the collectives of the
// memory its tensors live in: host memory (HostCollectives: MPI and shared memory) or
// a GPU (the collectives behind backends/gpu_collectives.h, made at the set's first
// GPU response). Barrier and join carry no data and always run on the host path. An
// allreduce that rode in negotiation's payload lane is finished by the payload lane.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/gpu_collectives.h"
#include "backends/host/host_collectives.h"
#include "backends/host/payload_lane.h"
#include "submit/tensor_queue.h"
#include "wire/message.h"

namespace lockstep {

class OpRunner {
 public:
  // `gpu` describes the set for its GPU collectives (its device is taken from the
  // first GPU response); `pending` finds this rank's op by name for the payload lane.
  OpRunner(const Topology& topology, Backend& host_transport, PhaseRecorder& phases,
           int64_t chunk_bytes, const GpuCollectivesOptions& gpu, PayloadLane::SpecLookup pending);
  ~OpRunner();

  // entries[i] is this rank's tensor for response.names[i], or nullptr when this rank
  // has joined. Returns one result per name; throws Error if the collective fails.
  // `reduced`: an allreduce already reduced in negotiation's payload lane (host memory
  // only), which the payload lane finishes from it without a collective.
  std::vector<OpResult> Run(const Response& response, const std::vector<TensorEntry*>& entries,
                            const void* reduced = nullptr);
  void set_chunk_bytes(int64_t chunk_bytes) { host_.set_chunk_bytes(chunk_bytes); }
  // Where negotiation's payload lane gets this rank's data (Controller::SetLaneSource).
  PayloadLane& payload_lane() { return payload_lane_; }
  // A failure of the GPU collectives since the last call (see Collectives::Poll).
  std::string Poll();
  // The device join(device=...) named (-1: none): where this rank, once joined, stands
  // in with zeros if the set's GPU collectives are made after it joined.
  void set_join_device(int device) { join_device_ = device; }

  // The device of the set's GPU collectives made for a response: this rank's tensor's,
  // else (joined) the one join named, else the process's bound GPU, else GPU 0.
  static int GpuDeviceFor(const std::vector<TensorEntry*>& entries, int join_device, int bound);

 private:
  Collectives& CollectivesFor(const Response& response, const std::vector<TensorEntry*>& entries);

  HostCollectives host_;
  PayloadLane payload_lane_;
  GpuCollectivesOptions gpu_options_;
  std::unique_ptr<Collectives> gpu_;  // made at the first GPU response
  // Why making them failed: making them is collective, so it is tried once and later
  // GPU responses fail with the same message on every member.
  std::string gpu_failure_;
  std::vector<LocalTensor> tensors_;  // Run's, reused: no allocation per op
  int join_device_ = -1;
};

}  // namespace lockstep
