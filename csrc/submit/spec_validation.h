// Checks an op a frontend submits, on the caller's thread, so argument errors are
// raised where the user made them rather than later from the background thread.
#pragma once

#include "lockstep/values.h"
#include "wire/message.h"

namespace lockstep {

// Throws Error naming the tensor and the problem. `gpu_unavailable`: why GPU tensors
// cannot be reduced in this process, empty where they can.
void ValidateSpec(const OpSpec& spec, const Topology& topology, const std::string& gpu_unavailable);

Request RequestFromSpec(const OpSpec& spec, int rank);

}  // namespace lockstep
