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

class HostCollectives : public Collectives {
 public:
  HostCollectives(const Topology& topology, Backend& transport, PhaseRecorder& phases,
                  int64_t chunk_bytes);

  // Also runs barrier and join (negotiation already synchronized the ranks) for
  // tensors of any device. The response's device is not looked at: the GPU path's
  // MPI staging hands host copies of device tensors here.
  std::vector<OpResult> Run(const Response& response,
                            const std::vector<LocalTensor>& tensors) override;
  // A single-tensor allreduce whose reduction already happened (it rode in
  // negotiation's payload lane): `reduced` holds every rank's prescaled contribution
  // combined; the output gets it, finished as RunAllreduce finishes its result
  // (postscale, Average's division). Timeline phase: ALLREDUCE_IN_NEGOTIATION.
  std::vector<OpResult> FinishReduced(const Response& response,
                                      const std::vector<LocalTensor>& tensors, const void* reduced);
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
  // Postscale, and Average's division by the world size.
  void FinishReduction(void* buffer, int64_t count, const Response& r);
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
