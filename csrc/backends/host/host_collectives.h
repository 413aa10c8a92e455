// The collectives on host memory: packs local tensors into the fusion buffer when
// several share a collective (in cache-sized chunks), applies scaling, calls the
// transport (MPI or shared memory), and produces each tensor's result. Ranks that
// joined contribute zeros.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "backends/collectives.h"
#include "common/phase_recorder.h"
#include "fusion/fusion_buffer.h"
#include "lockstep/values.h"
#include "wire/message.h"

namespace lockstep {

// A reduction's result finished in place: postscale, and Average's division by the
// world size (shared with the payload lane, whose results must match these).
void FinishReduction(void* buffer, int64_t count, const Response& r, int world_size);

class HostCollectives : public Collectives {
 public:
  HostCollectives(const Topology& topology, Backend& transport, PhaseRecorder& phases,
                  int64_t chunk_bytes);

  // Also runs barrier and join (negotiation already synchronized the ranks) for
  // tensors of any device. The response's device is not looked at: the GPU path's
  // MPI staging hands host copies of device tensors here.
  std::vector<OpResult> Run(const Response& response,
                            const std::vector<LocalTensor>& tensors) override;
  void set_chunk_bytes(int64_t chunk_bytes) { chunk_bytes_ = chunk_bytes; }

 private:
  std::vector<OpResult> RunAllreduce(const Response& r, const std::vector<LocalTensor>& tensors);
  std::vector<OpResult> RunAdasum(const Response& r, const std::vector<LocalTensor>& tensors);
  void CopyAdasumSegments(const Response& r, const std::vector<LocalTensor>& tensors, char* buffer,
                          bool into_buffer);
  OpResult RunAllgather(const Response& r, const OpSpec& spec);
  OpResult RunBroadcast(const Response& r, const OpSpec& spec);
  OpResult RunAlltoall(const Response& r, const OpSpec& spec);
  OpResult RunReducescatter(const Response& r, const OpSpec& spec);
  std::string PhaseName(const Response& r, const Backend& backend) const;
  void Phase(const std::vector<std::string>& names, const char* phase);
  void EndPhase(const std::vector<std::string>& names);

  Topology topology_;
  Backend& backend_;
  PhaseRecorder& timeline_;
  int64_t chunk_bytes_;         // changed only by the autotuner, between cycles
  FusionBuffer fusion_buffer_;  // staging for fused chunks and scaled reducescatter input
};

}  // namespace lockstep
