// The seam between negotiation and the payload lane's data. Negotiation decides which
// tensor rides in the lane from its cached response alone (kind, sizes, dtype, reduce
// op, device); this rank's data for it comes through this interface, implemented
// beside the host collectives (backends/host/payload_lane), so negotiation never
// reads, scales or reduces tensor memory.
#pragma once

#include <string>

#include "wire/message.h"

namespace lockstep {

class LaneSource {
 public:
  virtual ~LaneSource() = default;
  // Writes this rank's contribution to `response` (one allreduce of the tensor `name`,
  // which fits the lane) into `payload`: the input after prescale, exactly what the
  // data collective would reduce. False when it cannot ride: no input in host memory
  // here, or a contribution whose reduction could depend on the order of combining.
  virtual bool Fill(const Response& response, const std::string& name, void* payload) = 0;
};

}  // namespace lockstep
