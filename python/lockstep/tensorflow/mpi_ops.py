"""Horovod's collective API on tf.Tensor and tf.Variable, eager and in graphs.

Each collective is one native asynchronous op (op_library): it enqueues into the
core and returns, and the core completes it, so independent collectives of a
tf.function or Session run all start, fuse and finish in any order on each rank.
Gradients are registered per op type in gradients.py.

Arguments are checked here, while the graph is built, so a mistake is reported
where it is written; mismatches across ranks surface when the op runs, as
tf.errors.FailedPreconditionError on every rank.
"""

import tensorflow as tf

from lockstep import _core
from lockstep.common import validation
from lockstep.common.ops import (
    Adasum,
    Average,
    Sum,
    handle_average_backwards_compatibility,
    reduction_args,
)
from lockstep.common.process_sets import process_set_id as registered_id
from lockstep.common.process_sets import process_set_size
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.naming import collective
from lockstep.tensorflow.op_library import OPS
from lockstep.tensorflow.tensors import as_tensor, as_tensor_list


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
    process_set=None,
    ignore_name_scope=False,
):
    """Reduce `tensor` over all ranks (Average by default).

    A tf.IndexedSlices is gathered instead (values and indices from every rank),
    with values divided by the number of ranks for Average. device_dense and
    device_sparse are accepted for ported scripts; lockstep's ops run on the host.
    """
    set_id = _set_id(process_set)
    op = handle_average_backwards_compatibility(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        return _gather_indexed_slices([tensor], op, prescale_factor, postscale_factor, name, process_set)[0]
    tensor = as_tensor(tensor)
    reduce_op, prescale, postscale = _reduction(
        _core.OpType.ALLREDUCE, op, prescale_factor, postscale_factor, [tensor], set_id, name
    )
    compression = validation.check_compressor(compression) or Compression.none
    sent, context = compression.compress(tensor)
    reduced = collective(
        "Allreduce",
        name,
        lambda tensor_name: OPS.lockstep_allreduce(
            sent,
            reduce_op=reduce_op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            tensor_name=tensor_name,
            process_set_id=set_id,
        ),
    )
    return compression.decompress(reduced, context)


def grouped_allreduce(
    tensors,
    average=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=None,
    ignore_name_scope=False,
    name=None,
):
    """Allreduce a list of tensors negotiated and fused as one unit; returns a list.

    tf.IndexedSlices members are gathered (as in allreduce), the dense ones reduced
    together.
    """
    set_id = _set_id(process_set)
    tensors = _checked_sequence(tensors)
    if not tensors:
        return tensors
    op = handle_average_backwards_compatibility(op, average)
    results = list(tensors)
    sparse = [i for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    # Every argument is checked before any collective starts.
    dense_tensors = [as_tensor(tensors[i], f"tensors[{i}]") for i in dense]
    reduce_op, prescale, postscale = _reduction(
        _core.OpType.ALLREDUCE, op, prescale_factor, postscale_factor, dense_tensors, set_id, name
    )
    if sparse:
        gathered = _gather_indexed_slices(
            [tensors[i] for i in sparse], op, prescale_factor, postscale_factor, _suffixed(name, "sparse"), process_set
        )
        for position, slices in zip(sparse, gathered):
            results[position] = slices
    if dense:
        compression = validation.check_compressor(compression) or Compression.none
        compressed = [compression.compress(tensor) for tensor in dense_tensors]
        reduced = collective(
            "GroupedAllreduce",
            name,
            lambda tensor_name: OPS.lockstep_grouped_allreduce(
                [sent for sent, _ in compressed],
                reduce_op=reduce_op,
                prescale_factor=prescale,
                postscale_factor=postscale,
                tensor_name=tensor_name,
                process_set_id=set_id,
            ),
        )
        for position, out, (_, context) in zip(dense, reduced, compressed):
            results[position] = compression.decompress(out, context)
    return results


def allgather(tensor, name=None, ignore_name_scope=False, process_set=None):
    """Concatenate every rank's `tensor` along the first dimension (sizes may differ)."""
    set_id = _set_id(process_set)
    tensor = as_tensor(tensor)
    _check(_core.OpType.ALLGATHER, tensor, set_id, name)
    return collective(
        "Allgather",
        name,
        lambda tensor_name: OPS.lockstep_allgather(tensor, tensor_name=tensor_name, process_set_id=set_id),
    )


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=None):
    """allgather of each tensor, negotiated as one unit; returns a list."""
    set_id = _set_id(process_set)
    tensors = as_tensor_list(_checked_sequence(tensors))
    if not tensors:
        return tensors
    for tensor in tensors:
        _check(_core.OpType.ALLGATHER, tensor, set_id, name)
    return collective(
        "GroupedAllgather",
        name,
        lambda tensor_name: OPS.lockstep_grouped_allgather(tensors, tensor_name=tensor_name, process_set_id=set_id),
    )


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=None):
    """Return root_rank's `tensor` on every rank (root_rank is a global rank)."""
    set_id = _set_id(process_set)
    tensor = as_tensor(tensor)
    root_rank = validation.as_root_rank(root_rank)
    _check(_core.OpType.BROADCAST, tensor, set_id, name, root_rank=root_rank)
    return collective(
        "Broadcast",
        name,
        lambda tensor_name: OPS.lockstep_broadcast(
            tensor, root_rank=root_rank, tensor_name=tensor_name, process_set_id=set_id
        ),
    )


def broadcast_(variables, root_rank, name=None, process_set=None):
    """Broadcast into the variables themselves: after it, every rank's variables hold
    root_rank's values. Returns the variables (in a graph: their assigned values)."""
    from lockstep.tensorflow.variables import broadcast_into  # noqa: PLC0415 (variables imports this module)

    return broadcast_into(variables, root_rank, name, process_set)


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=None):
    """Send splits[i] rows of `tensor` to rank i (equal shares without splits).

    Returns the received rows in rank order, and with splits given also an int32
    tensor of the rows received from each rank.
    """
    set_id = _set_id(process_set)
    tensor = as_tensor(tensor)
    # The splits are a tensor, known when the op runs: the kernel checks the rows
    # against them (tf.errors.InvalidArgumentError, as Horovod's), so the first
    # dimension is left out here.
    _check(_core.OpType.ALLTOALL, tensor, set_id, name, rows_unknown=True)
    if splits is None:
        sent_splits = tf.zeros([0], tf.int32)
    else:
        sent_splits = tf.convert_to_tensor(splits)
        if not sent_splits.dtype.is_integer:
            raise TypeError(f"splits must hold integers, got dtype {sent_splits.dtype.name}")
        sent_splits = tf.cast(tf.reshape(sent_splits, [-1]), tf.int32)
    received, received_splits = collective(
        "Alltoall",
        name,
        lambda tensor_name: OPS.lockstep_alltoall(tensor, sent_splits, tensor_name=tensor_name, process_set_id=set_id),
    )
    return received if splits is None else (received, received_splits)


def reducescatter(
    tensor,
    device_dense="",
    compression=Compression.none,
    op=Average,
    name=None,
    process_set=None,
    ignore_name_scope=False,
    prescale_factor=1.0,
    postscale_factor=1.0,
):
    """Reduce across ranks and return this rank's share of the first dimension
    (the first `rows % size` ranks get one extra row)."""
    set_id = _set_id(process_set)
    tensor = as_tensor(tensor)
    reduce_op, prescale, postscale = _reduction(
        _core.OpType.REDUCESCATTER, op, prescale_factor, postscale_factor, [tensor], set_id, name
    )
    compression = validation.check_compressor(compression) or Compression.none
    sent, context = compression.compress(tensor)
    scattered = collective(
        "Reducescatter",
        name,
        lambda tensor_name: OPS.lockstep_reducescatter(
            sent,
            reduce_op=reduce_op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            tensor_name=tensor_name,
            process_set_id=set_id,
        ),
    )
    return compression.decompress(scattered, context)


def grouped_reducescatter(
    tensors,
    device_dense="",
    compression=Compression.none,
    op=Average,
    process_set=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    name=None,
):
    """reducescatter of each tensor, negotiated as one unit; returns a list."""
    set_id = _set_id(process_set)
    tensors = as_tensor_list(_checked_sequence(tensors))
    if not tensors:
        return tensors
    reduce_op, prescale, postscale = _reduction(
        _core.OpType.REDUCESCATTER, op, prescale_factor, postscale_factor, tensors, set_id, name
    )
    compression = validation.check_compressor(compression) or Compression.none
    compressed = [compression.compress(tensor) for tensor in tensors]
    scattered = collective(
        "GroupedReducescatter",
        name,
        lambda tensor_name: OPS.lockstep_grouped_reducescatter(
            [sent for sent, _ in compressed],
            reduce_op=reduce_op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            tensor_name=tensor_name,
            process_set_id=set_id,
        ),
    )
    return [compression.decompress(out, context) for out, (_, context) in zip(scattered, compressed)]


def barrier(process_set=None):
    """Return once every rank (of the set) has reached the barrier (in a graph: an op that does)."""
    set_id = _set_id(process_set)
    done = collective(
        "Barrier", None, lambda tensor_name: OPS.lockstep_barrier(tensor_name=tensor_name, process_set_id=set_id)
    )
    return None if tf.executing_eagerly() else done


def join():
    """Stop contributing: until every rank has joined, this rank takes part in the
    others' allreduces with zeros. Returns the last rank to join (int32 tensor)."""
    return collective("Join", None, lambda _: OPS.lockstep_join())


# Graph ops that read the topology when they run.


def rank_op(name=None):
    """This process's rank, as an int32 op evaluated when it runs."""
    return OPS.lockstep_rank(name=name)


def size_op(process_set_id=0, name=None):
    """The number of ranks (of the process set), as an int32 op evaluated when it runs;
    -3 for a set that is not registered then, as Horovod's op returns."""
    return OPS.lockstep_size(process_set_id=validation.as_int(process_set_id, "process_set_id"), name=name)


def local_rank_op(name=None):
    return OPS.lockstep_local_rank(name=name)


def local_size_op(name=None):
    return OPS.lockstep_local_size(name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 if this rank belongs to the process set, 0 if not, evaluated when it runs; -3 for
    a set that is not registered then, as Horovod's op returns."""
    return OPS.lockstep_process_set_included(
        process_set_id=validation.as_int(process_set_id, "process_set_id"), name=name
    )


# Helpers.


def _reduction(op_type, op, prescale_factor, postscale_factor, tensors, set_id, name):
    """(reduce op int, prescale, postscale), checked with each tensor while the graph is
    built."""
    reduce_op, prescale, postscale = reduction_args(op, prescale_factor, postscale_factor, op_type.name.lower())
    for tensor in tensors:
        _check(op_type, tensor, set_id, name, reduce_op=reduce_op, prescale=prescale, postscale=postscale)
    return int(reduce_op), prescale, postscale


def _check(op_type, tensor, set_id, name, rows_unknown=False, **arguments):
    """The core's checks of an op on `tensor` (validation.check_op), while the graph is
    built, so a mistake is reported where it is written rather than by a kernel."""
    shape = None if tensor.shape.rank is None else list(tensor.shape.as_list())
    if shape and rows_unknown:
        shape[0] = None
    validation.check_op(
        op_type,
        shape,
        validation.core_dtype(tensor.dtype.name),
        ps=set_id,
        name=name if isinstance(name, str) else None,
        **arguments,
    )


def _gather_indexed_slices(slices_list, op, prescale_factor, postscale_factor, name, process_set):
    """Horovod's allreduce of tf.IndexedSlices: allgather of values and of indices;
    Average divides the gathered values by the number of ranks."""
    if op == Adasum:
        raise NotImplementedError(
            "The Adasum reduction does not support tf.IndexedSlices; pass "
            "sparse_as_dense=True to reduce them as dense tensors"
        )
    if op not in (Sum, Average):
        raise NotImplementedError("Only Sum and Average ops are supported with tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices")
    values = grouped_allgather([s.values for s in slices_list], name=_suffixed(name, "values"), process_set=process_set)
    indices = grouped_allgather(
        [s.indices for s in slices_list], name=_suffixed(name, "indices"), process_set=process_set
    )
    gathered = []
    for slices, value, index in zip(slices_list, values, indices):
        if op == Average:
            value = value / tf.cast(process_set_size(_set_id(process_set)), value.dtype)
        gathered.append(tf.IndexedSlices(value, index, dense_shape=slices.dense_shape))
    return gathered


def _suffixed(name, suffix):
    return None if name is None else f"{name}.{suffix}"


def _checked_sequence(tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of tensors, got {type(tensors).__name__}")
    return list(tensors)


class UnregisteredProcessSetError(ValueError, TypeError):
    """An op built on a set that is not registered (never added, removed, or from
    before a shutdown). Horovod's ops get the set's id None then, which TensorFlow
    refuses with a TypeError while building; lockstep's sets raise ValueError."""


def _set_id(process_set):
    """The core id of `process_set`; None (Horovod's TF default) is the global set."""
    if process_set is None:
        return 0
    try:
        set_id = registered_id(process_set)
    except ValueError as error:
        raise UnregisteredProcessSetError(str(error)) from None
    # An id the core does not know (set by hand, or left from an earlier init): a
    # ValueError when the op is made, as Horovod's, not an error from the kernel.
    if set_id != 0 and _core.is_initialized() and set_id not in _core.process_set_ids():
        raise UnregisteredProcessSetError(f"{process_set}: process set {set_id} does not exist")
    return set_id
