"""Gradients of lockstep's ops, registered per op type, as in Horovod, so they
apply eagerly, in tf.function, in tf.compat.v1 graphs and in loaded SavedModels:

  allreduce      -> the same allreduce (op and scale factors) of the gradient
  allgather      -> Average-allreduce of the gradient, this rank's rows of it
  broadcast      -> Average-allreduce of the gradient on the root, zeros elsewhere
  alltoall       -> alltoall of the gradient back along the received splits
  reducescatter  -> allgather of the gradient (times the size for Sum), times the
                    forward's scale factors

Gradient collectives are unnamed: their names come from the graph or, eagerly,
from the core's counters, the same on every rank. They run on the forward op's
process set.
"""

import tensorflow as tf

from lockstep import _core
from lockstep.common import basics
from lockstep.common.ops import LINEAR_OPS, Average, Sum
from lockstep.common.process_sets import process_set_size
from lockstep.tensorflow.naming import collective
from lockstep.tensorflow.op_library import OPS


def _scaling(op):
    names = ("reduce_op", "prescale_factor", "postscale_factor", "process_set_id")
    return {name: op.get_attr(name) for name in names}


def _rank_in_set(set_id):
    if set_id == 0:
        return basics.rank()
    return _core.process_set_ranks(set_id).index(basics.rank())


def _dense(gradient, output):
    """Gradients reach a collective as tensors: densify IndexedSlices (e.g. from
    tf.gather on the output) and stand in zeros for outputs the loss ignores."""
    if gradient is None:
        return tf.zeros_like(output)
    return tf.convert_to_tensor(gradient)


def _check_differentiable(reduce_op):
    if reduce_op not in LINEAR_OPS:
        raise NotImplementedError(
            "gradients of allreduce are defined for op=Average and op=Sum only, not Min, Max or Product"
        )


def _average(tensor, set_id):
    return collective(
        "Allreduce",
        None,
        lambda tensor_name: OPS.lockstep_allreduce(
            tensor, reduce_op=Average, tensor_name=tensor_name, process_set_id=set_id
        ),
    )


def _rows_before_this_rank(tensor, set_id):
    """(first row of this rank's block in a gather of `tensor`, its row count)."""
    rows = tf.shape(tensor, out_type=tf.int64)[:1]
    all_rows = collective(
        "Allgather",
        None,
        lambda tensor_name: OPS.lockstep_allgather(rows, tensor_name=tensor_name, process_set_id=set_id),
    )
    return tf.reduce_sum(all_rows[: _rank_in_set(set_id)]), rows[0]


@tf.RegisterGradient("LockstepAllreduce")
def _allreduce_grad(op, grad):
    scaling = _scaling(op)
    _check_differentiable(scaling["reduce_op"])
    dense = _dense(grad, op.outputs[0])
    return collective(
        "Allreduce", None, lambda tensor_name: OPS.lockstep_allreduce(dense, tensor_name=tensor_name, **scaling)
    )


@tf.RegisterGradient("LockstepGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    scaling = _scaling(op)
    _check_differentiable(scaling["reduce_op"])
    dense = [_dense(grad, output) for grad, output in zip(grads, op.outputs)]
    return collective(
        "GroupedAllreduce",
        None,
        lambda tensor_name: OPS.lockstep_grouped_allreduce(dense, tensor_name=tensor_name, **scaling),
    )


def _allgather_grad_of(x, grad, y, set_id):
    averaged = _average(_dense(grad, y), set_id)
    start, rows = _rows_before_this_rank(x, set_id)
    return averaged[start : start + rows]


@tf.RegisterGradient("LockstepAllgather")
def _allgather_grad(op, grad):
    return _allgather_grad_of(op.inputs[0], grad, op.outputs[0], op.get_attr("process_set_id"))


@tf.RegisterGradient("LockstepGroupedAllgather")
def _grouped_allgather_grad(op, *grads):
    set_id = op.get_attr("process_set_id")
    return [_allgather_grad_of(x, grad, y, set_id) for x, grad, y in zip(op.inputs, grads, op.outputs)]


@tf.RegisterGradient("LockstepBroadcast")
def _broadcast_grad(op, grad):
    averaged = _average(_dense(grad, op.outputs[0]), op.get_attr("process_set_id"))
    # `* 0` rather than tf.zeros_like: graph optimizers turn zeros_like of a known
    # shape into a constant, which would prune the allreduce on this rank alone.
    return averaged if basics.rank() == op.get_attr("root_rank") else averaged * 0


@tf.RegisterGradient("LockstepAlltoall")
def _alltoall_grad(op, grad, _grad_splits):
    # Send every row's gradient back to the rank it came from.
    dense = _dense(grad, op.outputs[0])
    returned, _ = collective(
        "Alltoall",
        None,
        lambda tensor_name: OPS.lockstep_alltoall(
            dense, op.outputs[1], tensor_name=tensor_name, process_set_id=op.get_attr("process_set_id")
        ),
    )
    return returned, None


def _reducescatter_grad_of(op, grad, output):
    dense = _dense(grad, output)
    set_id = op.get_attr("process_set_id")
    gathered = collective(
        "Allgather",
        None,
        lambda tensor_name: OPS.lockstep_allgather(dense, tensor_name=tensor_name, process_set_id=set_id),
    )
    factor = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if op.get_attr("reduce_op") == Sum:
        factor *= process_set_size(set_id)
    return gathered if factor == 1.0 else gathered * tf.cast(factor, gathered.dtype)


@tf.RegisterGradient("LockstepReducescatter")
def _reducescatter_grad(op, grad):
    return _reducescatter_grad_of(op, grad, op.outputs[0])


@tf.RegisterGradient("LockstepGroupedReducescatter")
def _grouped_reducescatter_grad(op, *grads):
    return [_reducescatter_grad_of(op, grad, output) for grad, output in zip(grads, op.outputs)]


for _op_type in (
    "LockstepJoin",
    "LockstepBarrier",
    "LockstepRank",
    "LockstepSize",
    "LockstepLocalRank",
    "LockstepLocalSize",
    "LockstepProcessSetIncluded",
):
    tf.no_gradient(_op_type)
