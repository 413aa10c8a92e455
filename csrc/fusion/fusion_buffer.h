// Tensor fusion: which allreduce responses share one buffer, and the reused buffer
// itself. Planning is a pure function of the response list, so every rank fuses
// identically without talking.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "wire/message.h"

namespace lockstep {

// Merges compatible allreduce responses (same dtype, reduce op, scale factors and
// device) into multi-name responses of at most `threshold_bytes`; 0 disables fusion.
// A tensor at least `threshold_bytes` large, or at least `standalone_bytes` (when > 0),
// stays on its own: it is big enough to reduce efficiently without a staging copy.
// Other responses keep their relative order; each fused response sits where its first
// member was.
std::vector<Response> PlanFusion(std::vector<Response> responses, int64_t threshold_bytes,
                                 int64_t standalone_bytes = 0);

struct FusionLimits {
  int64_t threshold_bytes = 0;   // 0 disables fusion
  int64_t standalone_bytes = 0;  // > 0: tensors this large stay on their own
};
// As above, with separate limits for host and GPU responses (which never share a
// buffer: the device is part of what makes responses compatible).
std::vector<Response> PlanFusion(std::vector<Response> responses, const FusionLimits& host,
                                 const FusionLimits& device);

// A GPU tensor this large goes to NCCL on its own, straight from its memory: packing
// it would copy more bytes than the per-call cost it saves.
constexpr int64_t kDeviceStandaloneBytes = 16 * 1024 * 1024;

int64_t ResponseBytes(const Response& response);

// A grow-only host buffer, reused across cycles so steady state allocates nothing.
// Allreduces stage one chunk at a time, so it stays chunk-sized.
class FusionBuffer {
 public:
  void* Get(int64_t bytes);
  int64_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<char, void (*)(void*)> data_{nullptr, nullptr};
  int64_t capacity_ = 0;
};

}  // namespace lockstep
