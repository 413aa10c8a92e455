// Where each tensor of a fused GPU allreduce sits in the device fusion buffer, and how
// the pack and unpack copies are batched into kernel launches. Pure arithmetic (no
// CUDA), so every rank computes the same layout and it is tested without a GPU.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lockstep {

// Each tensor starts on this boundary: a multiple of every element size, and of the
// 16 bytes the copy kernel moves per vector access. The padding between tensors is
// reduced along with them and never read.
constexpr int64_t kDeviceFusionAlignment = 64;
// Copies per launch of the batched copy kernel: their descriptors travel as the
// kernel's parameter (24 bytes each; CUDA 12.1+ allows 32 KiB of parameters).
constexpr int kMaxCopiesPerLaunch = 256;

struct DeviceFusionLayout {
  std::vector<int64_t> offsets;  // byte offset of each tensor in the buffer
  int64_t total_bytes = 0;       // what the collective covers: last offset + last size
  // Launches of the batched copy kernel: [first, last) tensor indices of each.
  std::vector<std::pair<int, int>> launches;
};

// bytes[i]: the size of tensor i, a whole number of elements; since the alignment is a
// multiple of every element size, the total is a whole number of elements too.
DeviceFusionLayout PlanDeviceFusion(const std::vector<int64_t>& bytes);

}  // namespace lockstep
