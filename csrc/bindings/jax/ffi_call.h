// What the JAX FFI handlers (CPU and CUDA) share: decoding one custom call into the
// core's OpSpecs, and checking a result against the shape XLA fixed when tracing.
//
// Names are fixed when the program is traced (Python passes `name`), so they match
// across ranks however XLA schedules the calls; a group's members are "<name>.<i>",
// as the Python frontends name them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockstep/lockstep.h"
#include "xla/ffi/api/ffi.h"

namespace lockstep {
namespace jax {

// The parameters every member of one call shares (the FFI attributes).
struct CallAttributes {
  OpType op;
  std::string name;
  ReduceOp reduce_op;
  double prescale;
  double postscale;
  int root_rank;
  std::vector<int64_t> splits;
  int32_t process_set_id;
};

CallAttributes MakeCallAttributes(int32_t op, std::string_view name, int32_t reduce_op,
                                  double prescale, double postscale, int32_t root_rank,
                                  xla::ffi::Span<const int64_t> splits, int32_t process_set_id);

// Ops whose result the core allocates (its size is only known after negotiation):
// the handler copies it into XLA's output, whose shape was fixed at trace time.
bool CoreAllocatesResult(OpType op);

// Where one member's result goes, and (alltoall) where its received splits go. The
// pointers are XLA's buffers: host memory for the CPU handler, device memory for CUDA.
struct MemberOutput {
  void* data = nullptr;
  size_t bytes = 0;
  std::vector<int64_t> traced_shape;
  void* received_splits = nullptr;  // int64 per rank; null unless the call asked for them
};

// One call's members, ready to submit (specs[i] writes to outputs[i]). The specs are
// host ops: a device handler sets their device and stream.
struct DecodedCall {
  std::vector<OpSpec> specs;
  std::vector<MemberOutput> outputs;
};

// Pairs XLA's inputs with its outputs and builds the specs; an error when they do not
// pair up, an element type the core lacks, or lockstep is not running.
xla::ffi::Error DecodeCall(const CallAttributes& call, xla::ffi::RemainingArgs args,
                           xla::ffi::RemainingRets rets, DecodedCall* decoded);

// The FFI error for a failed op (the core's status code and message).
xla::ffi::Error FailedOp(const Status& status);

// Success, or the clear error when a rank's result does not have the size XLA fixed
// when tracing (uneven allgather/alltoall rows without sizes).
xla::ffi::Error CheckResultSize(const std::string& call_name, const MemberOutput& output,
                                const OpResult& result);

// `binding` followed by the attributes every handler takes, in MakeCallAttributes'
// order (Python passes them by name: compiled_ops.call).
template <typename Binding>
auto BindCallAttributes(Binding binding) {
  return std::move(binding)
      .template Attr<int32_t>("op")
      .template Attr<std::string_view>("name")
      .template Attr<int32_t>("reduce_op")
      .template Attr<double>("prescale")
      .template Attr<double>("postscale")
      .template Attr<int32_t>("root_rank")
      .template Attr<xla::ffi::Span<const int64_t>>("splits")
      .template Attr<int32_t>("process_set_id");
}

}  // namespace jax
}  // namespace lockstep
