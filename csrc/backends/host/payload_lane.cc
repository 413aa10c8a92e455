#include "backends/host/payload_lane.h"

#include <cstring>

#include "backends/host/host_collectives.h"
#include "reduction/reduce_kernels.h"
#include "reduction/scaling.h"

namespace lockstep {

PayloadLane::PayloadLane(const Topology& topology, PhaseRecorder& phases, SpecLookup lookup)
    : topology_(topology), phases_(phases), lookup_(std::move(lookup)) {}

// The contribution is the input after prescale, exactly what the data path reduces
// (ChunkedAllreduce), and it rides only where every order of combining gives the data
// path's bits (see ReducesExactlyInAnyOrder): MPI may combine the lanes in any order.
bool PayloadLane::Fill(const Response& response, const std::string& name, void* payload) {
  const OpSpec* spec = lookup_(name);
  if (spec == nullptr || spec->device >= 0) return false;  // the data is not in host memory
  const int64_t count = response.sizes.at(0);
  std::memcpy(payload, spec->input, static_cast<size_t>(count) * DataTypeSize(response.dtype));
  ScaleInPlace(payload, count, response.dtype, response.prescale);
  return ReducesExactlyInAnyOrder(payload, count, response.dtype, response.reduce_op,
                                  topology_.size);
}

std::vector<OpResult> PayloadLane::Finish(const Response& r,
                                          const std::vector<LocalTensor>& tensors,
                                          const void* reduced) {
  if (r.type != ResponseType::kAllreduce || r.names.size() != 1 || tensors.size() != 1 ||
      tensors[0].spec == nullptr) {
    throw Error("internal error: a reduced payload for " + r.names.front() +
                ", which is not one local allreduce");
  }
  const OpSpec& spec = *tensors[0].spec;
  const int64_t count = r.sizes.at(0);
  if (phases_.active()) phases_.Begin(r.names.front(), "ALLREDUCE_IN_NEGOTIATION");
  std::memcpy(spec.output, reduced, static_cast<size_t>(count) * DataTypeSize(r.dtype));
  FinishReduction(spec.output, count, r, topology_.size);
  if (phases_.active()) phases_.End(r.names.front());
  std::vector<OpResult> results(1);
  results[0].shape = spec.shape;
  return results;
}

void ReduceLanePayload(const LaneHeader& lane, const void* in, void* inout) {
  ReduceInto(in, inout, lane.count, lane.dtype, lane.reduce_op);
}

void CombineLaneVectors(const uint64_t* in, uint64_t* inout, size_t words) {
  CombineCycleVectors(in, inout, words, &ReduceLanePayload);
}

}  // namespace lockstep
