// The payload lane's data, all in one place: a small cached allreduce whose data rides
// inside negotiation's cycle vector instead of running a data collective. Its path:
//   1. Fill (negotiation calls it through LaneSource once it has picked the tensor):
//      this rank's input, copied out of host memory and prescaled, if every order of
//      combining gives the data collective's bits;
//   2. CombineLaneVectors (the exchange's combining function, across ranks): the
//      format's rule (wire/cycle_lane.h) with the payloads reduced by ReduceInto;
//   3. Finish (the op runner, when negotiation reports the tensor ridden): the reduced
//      payload into the output, postscaled and divided for Average as the host
//      collectives finish theirs.
// Which tensor rides, and when, is negotiation's (negotiation/controller.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/collectives.h"
#include "common/phase_recorder.h"
#include "lockstep/values.h"
#include "negotiation/lane_source.h"
#include "wire/cycle_lane.h"

namespace lockstep {

class PayloadLane : public LaneSource {
 public:
  // This rank's op for a pending tensor, by name; nullptr when there is none.
  using SpecLookup = std::function<const OpSpec*(const std::string& name)>;

  PayloadLane(const Topology& topology, PhaseRecorder& phases, SpecLookup lookup);

  bool Fill(const Response& response, const std::string& name, void* payload) override;
  // The op's result from `reduced` (every rank's prescaled contribution combined), as
  // HostCollectives finishes an allreduce. Timeline phase: ALLREDUCE_IN_NEGOTIATION.
  std::vector<OpResult> Finish(const Response& response, const std::vector<LocalTensor>& tensors,
                               const void* reduced);

 private:
  Topology topology_;
  PhaseRecorder& phases_;
  SpecLookup lookup_;
};

// Two lanes' payloads, both carrying `lane`: inout = ReduceInto(in, inout).
void ReduceLanePayload(const LaneHeader& lane, const void* in, void* inout);
// The combining function of cycle vectors with a lane (ExchangeOptions::combine).
void CombineLaneVectors(const uint64_t* in, uint64_t* inout, size_t words);

}  // namespace lockstep
