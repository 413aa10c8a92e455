"""Horovod's collective API on tf.Tensor and tf.Variable, eager and in graphs.

Every op returns new tensors and is differentiable, with Horovod's gradients
(the same as lockstep.torch's):
  allreduce      -> the same allreduce (op and scale factors) of the gradient
  allgather      -> Average-allreduce of the gradient, this rank's rows of it
  broadcast      -> Average-allreduce of the gradient on the root, zeros elsewhere
  alltoall       -> alltoall of the gradient back along the received splits
  reducescatter  -> allgather of the gradient, times the forward's scale factors
                    (and 1/size for Average)
Names are
optional: ranks match ops by name, and automatic names are deterministic (see
op_builder). In a tf.function, independent collectives run concurrently.
"""

import tensorflow as tf

from lockstep.common import basics, validation
from lockstep.common.dispatch import Scaling
from lockstep.common.ops import Average, Max, Min, Product, Sum, handle_average_backwards_compatibility
from lockstep.common.ops import to_core_reduce_op
from lockstep.tensorflow import host_ops, op_builder
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.tensors import as_tensor

_ALLREDUCE_OPS = (Average, Sum, Min, Max, Product)
_REDUCESCATTER_OPS = (Average, Sum)


def allreduce(
    tensor,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
):
    """Reduce `tensor` over all ranks (Average by default).

    A tf.IndexedSlices is gathered instead (values and indices from every rank),
    with values divided by the number of ranks for Average. device_dense and
    device_sparse are accepted for ported scripts; lockstep ops run on the host.
    """
    op = handle_average_backwards_compatibility(op, average)
    scaling = _checked_scaling(op, prescale_factor, postscale_factor, _ALLREDUCE_OPS, "allreduce")
    if isinstance(tensor, tf.IndexedSlices):
        return _gather_indexed_slices(tensor, scaling, name)
    sent, context = compression.compress(as_tensor(tensor))
    return compression.decompress(_allreduce(sent, scaling, name), context)


def grouped_allreduce(
    tensors,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
):
    """Allreduce a list of tensors negotiated and fused as one unit; returns a list."""
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of tensors, got {type(tensors).__name__}")
    if len(tensors) == 0:
        raise ValueError("grouped_allreduce needs at least one tensor")
    op = handle_average_backwards_compatibility(op, average)
    scaling = _checked_scaling(op, prescale_factor, postscale_factor, _ALLREDUCE_OPS, "grouped_allreduce")
    compressed = [compression.compress(as_tensor(t, f"tensors[{i}]")) for i, t in enumerate(tensors)]
    reduced = _grouped_allreduce([sent for sent, _ in compressed], scaling, name)
    return [compression.decompress(out, context) for out, (_, context) in zip(reduced, compressed)]


def allgather(tensor, name=None):
    """Concatenate every rank's `tensor` along the first dimension (sizes may differ)."""
    tensor = as_tensor(tensor)
    validation.check_has_first_dim(tensor.shape, "allgather")
    return _allgather(tensor, name)


def broadcast(tensor, root_rank, name=None):
    """Return root_rank's `tensor` on every rank."""
    tensor = as_tensor(tensor)
    root_rank = validation.check_root_rank(root_rank, basics.size())
    return _broadcast(tensor, root_rank, name)


def alltoall(tensor, splits=None, name=None):
    """Send splits[i] rows of `tensor` to rank i (equal shares without splits).

    Returns the received rows in rank order, and with splits given also an int32
    tensor of the rows received from each rank.
    """
    tensor = as_tensor(tensor)
    validation.check_has_first_dim(tensor.shape, "alltoall")
    if splits is None:
        received, _ = _alltoall(tensor, None, name)
        return received
    splits = tf.convert_to_tensor(splits)
    if not splits.dtype.is_integer:
        raise TypeError(f"splits must hold integers, got dtype {splits.dtype.name}")
    return _alltoall(tensor, splits, name)


def reducescatter(tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0):
    """Reduce across ranks and return this rank's share of the first dimension
    (the first `rows % size` ranks get one extra row)."""
    scaling = _checked_scaling(op, prescale_factor, postscale_factor, _REDUCESCATTER_OPS, "reducescatter")
    tensor = as_tensor(tensor)
    validation.check_has_first_dim(tensor.shape, "reducescatter")
    return _reducescatter(tensor, scaling, name)


def barrier():
    """Return once every rank has reached the barrier (in a graph: an op that does)."""
    (done,) = op_builder.run("Barrier", lambda _: host_ops.Barrier(), [], [tf.int32], [[]],
                             finish=host_ops.finish_barrier)
    return None if tf.executing_eagerly() else done.op


def join():
    """Stop contributing: until every rank has joined, this rank takes part in the
    others' allreduces with zeros. Returns the last rank to join (int32 tensor)."""
    (last_rank,) = op_builder.run("Join", lambda _: host_ops.Join(), [], [tf.int32], [[]],
                                  finish=host_ops.finish_join)
    return last_rank


# Differentiable building blocks. Gradient collectives get automatic names.


def _allreduce(tensor, scaling, name):
    @tf.custom_gradient
    def forward(x):
        (y,) = op_builder.run(
            "Allreduce", lambda n: host_ops.Allreduce(scaling, n, grouped=False), [x], [x.dtype], [x.shape], name
        )
        return y, lambda dy: _allreduce(_dense(dy, y), _gradient_scaling(scaling), None)

    return forward(tensor)


def _grouped_allreduce(tensors, scaling, name):
    @tf.custom_gradient
    def forward(*xs):
        ys = op_builder.run(
            "GroupedAllreduce",
            lambda n: host_ops.Allreduce(scaling, n, grouped=True),
            xs,
            [x.dtype for x in xs],
            [x.shape for x in xs],
            name,
        )

        def backward(*dys):
            return _grouped_allreduce([_dense(dy, y) for dy, y in zip(dys, ys)], _gradient_scaling(scaling), None)

        return ys, backward

    return forward(*tensors)


def _allgather(tensor, name):
    @tf.custom_gradient
    def forward(x):
        shape = [None] + x.shape.as_list()[1:]
        (y,) = op_builder.run("Allgather", lambda n: host_ops.Allgather(n), [x], [x.dtype], [shape], name)

        def backward(dy):
            averaged = _allreduce(_dense(dy, y), Scaling(Average), None)
            rows = tf.shape(x, out_type=tf.int64)[:1]
            all_rows = _allgather(rows, None)
            start = tf.reduce_sum(all_rows[: basics.rank()])
            return averaged[start : start + rows[0]]

        return y, backward

    return forward(tensor)


def _broadcast(tensor, root_rank, name):
    @tf.custom_gradient
    def forward(x):
        (y,) = op_builder.run(
            "Broadcast", lambda n: host_ops.Broadcast(root_rank, n), [x], [x.dtype], [x.shape], name
        )

        def backward(dy):
            averaged = _allreduce(_dense(dy, y), Scaling(Average), None)
            return averaged if basics.rank() == root_rank else tf.zeros_like(averaged)

        return y, backward

    return forward(tensor)


def _alltoall(tensor, splits, name):
    inputs = [tensor] if splits is None else [tensor, splits]
    shapes = [[None] + tensor.shape.as_list()[1:], [basics.size()]]

    @tf.custom_gradient
    def forward(x):
        received, received_splits = op_builder.run(
            "Alltoall", lambda n: host_ops.Alltoall(n), [x] + inputs[1:], [x.dtype, tf.int32], shapes, name
        )

        def backward(d_received, _d_splits):
            # Send every row's gradient back to the rank it came from.
            returned, _ = _alltoall(_dense(d_received, received), received_splits, None)
            return returned

        return (received, received_splits), backward

    return forward(tensor)


def _reducescatter(tensor, scaling, name):
    @tf.custom_gradient
    def forward(x):
        shape = [None] + x.shape.as_list()[1:]
        (y,) = op_builder.run(
            "Reducescatter", lambda n: host_ops.Reducescatter(scaling, n), [x], [x.dtype], [shape], name
        )

        def backward(dy):
            gathered = _allgather(_dense(dy, y), None)
            factor = scaling.prescale * scaling.postscale
            if scaling.op == Average:
                factor /= basics.size()
            return gathered if factor == 1.0 else gathered * tf.cast(factor, gathered.dtype)

        return y, backward

    return forward(tensor)


def _gather_indexed_slices(slices, scaling, name):
    if scaling.op not in (Average, Sum):
        raise ValueError("allreduce of tf.IndexedSlices supports only op=Average or op=Sum")
    base = name or None
    values = allgather(slices.values, name=None if base is None else f"{base}.values")
    indices = allgather(slices.indices, name=None if base is None else f"{base}.indices")
    factor = scaling.prescale * scaling.postscale
    if scaling.op == Average:
        factor /= basics.size()
    if factor != 1.0:
        values = values * tf.cast(factor, values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def _dense(gradient, output):
    """Gradients reach a collective as tensors: densify IndexedSlices (e.g. from
    tf.gather on the output) and stand in zeros for outputs the loss ignores."""
    if gradient is None:
        return tf.zeros_like(output)
    return tf.convert_to_tensor(gradient)


def _gradient_scaling(scaling):
    if scaling.op not in (Average, Sum):
        raise NotImplementedError(
            "gradients of allreduce are defined for op=Average and op=Sum only, not Min, Max or Product"
        )
    return scaling


def _checked_scaling(op, prescale_factor, postscale_factor, allowed, op_kind):
    """Validate while building, so a graph reports bad arguments where they are written."""
    to_core_reduce_op(op, allowed, op_kind)
    prescale = validation.as_scale_factor(prescale_factor, "prescale_factor")
    postscale = validation.as_scale_factor(postscale_factor, "postscale_factor")
    return Scaling(int(op), prescale, postscale)
