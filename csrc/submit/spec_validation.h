// Checks an op a frontend submits, on the caller's thread, so argument errors are
// raised where the user made them rather than later from the background thread.
#pragma once

#include "lockstep/values.h"
#include "wire/message.h"

namespace lockstep {

// Throws Error naming the tensor and the problem. `gpu_unavailable`: why GPU tensors
// cannot be reduced in this process, empty where they can. Makes ValidateArguments'
// checks, with the set's size for both sizes (the engine has turned a set's root rank
// into the set's numbering by then).
void ValidateSpec(const OpSpec& spec, const Topology& topology, const std::string& gpu_unavailable);

// The checks of an op's argument values, which need neither memory nor a running
// engine: the root rank, alltoall's splits or even split, a first dimension where the
// op works on rows, and the reduce op for the op, the dtype and the set's size. The
// one place these are written: every Submit and Run makes them (ValidateSpec), and a
// frontend that must refuse an op before any rank runs it (a TensorFlow graph being
// built, a JAX function being traced) makes them through CheckOpArguments.
// `set_size`: ranks in the op's process set; `world_size`: the range of root_rank (a
// global rank). A negative dimension is one not known yet (a graph being built): the
// checks that need it are left for when the op runs, as are all the shape's checks
// where `rank_known` is false. Throws Error with the code the frontends map to the
// exception types Horovod raises (kInvalidArgument, kUnsupported, kUnimplemented).
void ValidateArguments(const OpSpec& spec, int set_size, int world_size, bool rank_known = true);

Request RequestFromSpec(const OpSpec& spec, int rank);

}  // namespace lockstep
