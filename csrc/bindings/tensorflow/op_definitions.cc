// The TensorFlow ops lockstep registers: the collectives (asynchronous kernels in
// collective_kernels.cc) and the topology queries (topology_kernels.cc).
//
// Every collective carries `tensor_name`, the name ranks negotiate by: the Python
// wrapper sets it from the user's name or, in graphs, from the op's graph-unique
// scope; empty (eager, unnamed) makes the kernel take the core's next automatic
// name. And `process_set_id`, the set it runs on (0: all ranks).
//
// Every op is stateful: it talks to the other ranks. Otherwise graph optimizers
// treat it as a pure function: constant folding runs collectives with constant
// inputs one by one while optimizing, in an order that differs between ranks
// (a deadlock, seen with Grappler in Sessions), and common-subexpression
// elimination or pruning could drop one on some ranks only. In tf.function the
// Python wrapper marks each collective order-independent, so automatic control
// dependencies do not chain them: independent collectives start together and the
// core fuses them.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace lockstep {
namespace tf {
namespace {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

// Every element type the core carries.
#define LOCKSTEP_TF_TYPES \
  "{uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}"
#define LOCKSTEP_TF_TYPE_LIST                                                              \
  "list({uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}) " \
  ">= 1"

// The attributes of a reduction. Scale factors are float attributes, as in Horovod:
// a factor is rounded to float32 before the core applies it.
#define LOCKSTEP_REDUCTION_ATTRS \
  Attr("reduce_op: int").Attr("prescale_factor: float = 1.0").Attr("postscale_factor: float = 1.0")

// Output i: the shape of input i with an unknown first dimension (known only once
// every rank's rows are known).
absl::Status UnknownRowsShape(InferenceContext* c, int input, int output) {
  ShapeHandle in;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(input), 1, &in));
  ShapeHandle rest;
  TF_RETURN_IF_ERROR(c->Subshape(in, 1, &rest));
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->Concatenate(c->Vector(c->UnknownDim()), rest, &out));
  c->set_output(output, out);
  return absl::OkStatus();
}

absl::Status SameShapes(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

absl::Status UnknownRowsShapes(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) TF_RETURN_IF_ERROR(UnknownRowsShape(c, i, i));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("LockstepAllreduce")
    .Attr("T: " LOCKSTEP_TF_TYPES)
    .LOCKSTEP_REDUCTION_ATTRS.Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("reduced: T")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("LockstepGroupedAllreduce")
    .Attr("T: " LOCKSTEP_TF_TYPE_LIST)
    .LOCKSTEP_REDUCTION_ATTRS.Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensors: T")
    .Output("reduced: T")
    .SetIsStateful()
    .SetShapeFn(SameShapes);

REGISTER_OP("LockstepAllgather")
    .Attr("T: " LOCKSTEP_TF_TYPES)
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("gathered: T")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return UnknownRowsShape(c, 0, 0); });

REGISTER_OP("LockstepGroupedAllgather")
    .Attr("T: " LOCKSTEP_TF_TYPE_LIST)
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensors: T")
    .Output("gathered: T")
    .SetIsStateful()
    .SetShapeFn(UnknownRowsShapes);

REGISTER_OP("LockstepBroadcast")
    .Attr("T: " LOCKSTEP_TF_TYPES)
    .Attr("root_rank: int")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("broadcast: T")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("LockstepAlltoall")
    .Attr("T: " LOCKSTEP_TF_TYPES)
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("splits: int32")  // rows sent to each rank; empty: an equal split
    .Output("received: T")
    .Output("received_splits: int32")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(UnknownRowsShape(c, 0, 0));
      ShapeHandle splits;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &splits));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

REGISTER_OP("LockstepReducescatter")
    .Attr("T: " LOCKSTEP_TF_TYPES)
    .LOCKSTEP_REDUCTION_ATTRS.Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("scattered: T")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return UnknownRowsShape(c, 0, 0); });

REGISTER_OP("LockstepGroupedReducescatter")
    .Attr("T: " LOCKSTEP_TF_TYPE_LIST)
    .LOCKSTEP_REDUCTION_ATTRS.Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensors: T")
    .Output("scattered: T")
    .SetIsStateful()
    .SetShapeFn(UnknownRowsShapes);

REGISTER_OP("LockstepJoin")
    .Output("last_joined_rank: int32")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape);

REGISTER_OP("LockstepBarrier")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs);

#define LOCKSTEP_TOPOLOGY_OP(op_name) \
  REGISTER_OP(op_name)                \
      .Output("value: int32")         \
      .SetIsStateful()                \
      .SetShapeFn(tensorflow::shape_inference::ScalarShape)

LOCKSTEP_TOPOLOGY_OP("LockstepRank");
LOCKSTEP_TOPOLOGY_OP("LockstepSize").Attr("process_set_id: int = 0");
LOCKSTEP_TOPOLOGY_OP("LockstepLocalRank");
LOCKSTEP_TOPOLOGY_OP("LockstepLocalSize");

REGISTER_OP("LockstepProcessSetIncluded")
    .Attr("process_set_id: int = 0")
    .Output("included: int32")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape);

}  // namespace tf
}  // namespace lockstep
