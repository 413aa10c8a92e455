// Runs one planned response on this rank: packs local tensors into the fusion
// buffer when several share a collective, applies scaling, calls the backend, and
// produces each tensor's result. Ranks that joined contribute zeros.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "engine/tensor_queue.h"
#include "engine/timeline.h"
#include "fusion/fusion_buffer.h"
#include "lockstep/lockstep.h"
#include "wire/message.h"

namespace lockstep {

class OpRunner {
 public:
  OpRunner(const Topology& topology, Backend& host_backend, Timeline& timeline,
           int64_t chunk_bytes);

  // entries[i] is this rank's tensor for response.names[i], or nullptr when this rank
  // has joined. Returns one result per name; throws Error if the collective fails.
  std::vector<OpResult> Run(const Response& response, const std::vector<TensorEntry*>& entries);
  void set_chunk_bytes(int64_t chunk_bytes) { chunk_bytes_ = chunk_bytes; }

 private:
  Backend& BackendFor(const Response& response);
  std::vector<OpResult> RunAllreduce(const Response& r, const std::vector<TensorEntry*>& entries);
  std::vector<OpResult> RunAdasum(const Response& r, const std::vector<TensorEntry*>& entries);
  void CopyAdasumSegments(const Response& r, const std::vector<TensorEntry*>& entries, char* buffer,
                          bool into_buffer);
  OpResult RunAllgather(const Response& r, TensorEntry& entry);
  OpResult RunBroadcast(const Response& r, TensorEntry& entry);
  OpResult RunAlltoall(const Response& r, TensorEntry& entry);
  OpResult RunReducescatter(const Response& r, TensorEntry& entry);
  // Postscale, and Average's division by the world size.
  void FinishReduction(void* buffer, int64_t count, const Response& r);
  void Phase(const std::vector<std::string>& names, const char* phase);
  void EndPhase(const std::vector<std::string>& names);

  Topology topology_;
  Backend& host_backend_;
  Timeline& timeline_;
  int64_t chunk_bytes_;         // changed only by the autotuner, between cycles
  FusionBuffer fusion_buffer_;  // staging for fused chunks and scaled reducescatter input
};

}  // namespace lockstep
