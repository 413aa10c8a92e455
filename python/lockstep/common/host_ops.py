"""Horovod's collective API on host (numpy) arrays.

lockstep.numpy re-exports it; the TensorFlow, Keras and JAX frontends use it for
what they move through host memory, so it lives in the layer they all share.
Every op returns new arrays and leaves its inputs untouched; C-contiguous inputs are
read in place (zero-copy), others are copied first. The *_async variants return a
handle for poll() and synchronize().
"""

import numpy as np

from lockstep.common import basics, validation
from lockstep.common.dispatch import Scaling
from lockstep.common.host_arrays import (
    CORE_DTYPES,
    array_from_result,
    as_array,
    core_dtype,
    empty_like,
    new_output_like,
    tensor_ref,
)
from lockstep.common.host_compression import Compression
from lockstep.common.objects import ObjectCollectives
from lockstep.common.ops import Average, handle_average_backwards_compatibility
from lockstep.common.process import DISPATCHER, NAMER
from lockstep.common.process_sets import global_process_set, process_set_id


def allreduce_async(
    tensor,
    average=None,
    name=None,
    compression=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    op, sent, output, finish = _prepare_allreduce(tensor, average, compression, op)
    scaling = Scaling(op, prescale_factor, postscale_factor)
    return DISPATCHER.allreduce(
        tensor_ref(sent), tensor_ref(output), scaling, name, lambda result: finish(), process_set_id(process_set)
    )


def allreduce(
    tensor,
    average=None,
    name=None,
    compression=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduce `tensor` across ranks (Average by default) and return the result."""
    # The common case, inline: a few microseconds is the whole op for small tensors. The
    # core decides whether op, factors and name are plain (DISPATCHER.run_allreduce).
    if tensor.__class__ is np.ndarray and compression is None and average is None and tensor.flags.c_contiguous:
        plain = CORE_DTYPES.get(tensor.dtype)
        if plain is not None:
            output = empty_like(tensor)  # C-contiguous, as the tensor is
            DISPATCHER.run_allreduce(
                plain,
                None,
                tensor,
                output,
                Average if op is None else op,
                prescale_factor,
                postscale_factor,
                name,
                0 if process_set is global_process_set else process_set_id(process_set),
            )
            return output
    op, sent, output, finish = _prepare_allreduce(tensor, average, compression, op)
    _reduce_into(core_dtype(sent.dtype), sent, output, op, prescale_factor, postscale_factor, name, process_set)
    return finish()


def allreduce_async_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Start reducing `tensor` across ranks in place; synchronize() returns `tensor`.

    No output is allocated: for large arrays reused every step (gradients), this saves
    faulting in fresh pages each time. Leave the array alone until synchronized.
    """
    target = _writable(tensor)
    array = as_array(target)
    ref = tensor_ref(array)
    scaling = Scaling(handle_average_backwards_compatibility(op, average), prescale_factor, postscale_factor)
    return DISPATCHER.allreduce(
        ref, ref, scaling, name, lambda result: _copy_back(target, array), process_set_id(process_set)
    )


def allreduce_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Reduce `tensor` across ranks in place and return it."""
    # The common case, inline (as in allreduce).
    if tensor.__class__ is np.ndarray and average is None:
        flags = tensor.flags
        plain = CORE_DTYPES.get(tensor.dtype) if flags.c_contiguous and flags.writeable else None
        if plain is not None:
            DISPATCHER.run_allreduce(
                plain,
                None,
                tensor,
                tensor,
                Average if op is None else op,
                prescale_factor,
                postscale_factor,
                name,
                0 if process_set is global_process_set else process_set_id(process_set),
            )
            return tensor
    target = _writable(tensor)
    array = as_array(target)
    op = handle_average_backwards_compatibility(op, average)
    _reduce_into(core_dtype(array.dtype), array, array, op, prescale_factor, postscale_factor, name, process_set)
    return _copy_back(target, array)


def _reduce_into(dtype, array, output, op, prescale_factor, postscale_factor, name, process_set):
    """The synchronous allreduce of C-contiguous `array` into `output` (may be `array`)."""
    DISPATCHER.run_allreduce(
        dtype, None, array, output, op, prescale_factor, postscale_factor, name, process_set_id(process_set)
    )


def _writable(tensor):
    """The array an in-place op writes its result into."""
    if not isinstance(tensor, np.ndarray):  # a numpy scalar would be a temporary copy
        raise TypeError(f"tensor must be a numpy.ndarray for an in-place op, got {type(tensor).__name__}")
    if not tensor.flags.writeable:
        raise ValueError("tensor is read-only; an in-place op writes its result into it")
    return tensor


def _copy_back(target, array):
    """`target` holding the result: a non-contiguous target was reduced as a copy."""
    if array is not target:
        np.copyto(target, array)
    return target


def _prepare_allreduce(tensor, average, compression, op):
    """(reduce op, array sent, output array, function returning the result)."""
    op = handle_average_backwards_compatibility(op, average)
    compressor = validation.check_compressor(compression) or Compression.none
    sent, context = compressor.compress(as_array(tensor))
    sent = as_array(sent, "compressed tensor")
    output = empty_like(sent)
    return op, sent, output, lambda: compressor.decompress(output, context)


def grouped_allreduce_async(
    tensors,
    average=None,
    name=None,
    compression=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of arrays, got {type(tensors).__name__}")
    op = handle_average_backwards_compatibility(op, average)
    compressor = validation.check_compressor(compression) or Compression.none
    compressed = [compressor.compress(as_array(t, f"tensors[{i}]")) for i, t in enumerate(tensors)]
    sent = [as_array(array, f"compressed tensors[{i}]") for i, (array, _) in enumerate(compressed)]
    outputs = [new_output_like(array) for array in sent]

    def finish(results):
        return [compressor.decompress(output, context) for (output, _), (_, context) in zip(outputs, compressed)]

    scaling = Scaling(op, prescale_factor, postscale_factor)
    return DISPATCHER.grouped_allreduce(
        [tensor_ref(array) for array in sent],
        [ref for _, ref in outputs],
        scaling,
        name,
        finish,
        process_set_id(process_set),
    )


def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    compression=None,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Allreduce a list of arrays as one negotiated, fused unit; returns a list."""
    return DISPATCHER.run_now(
        grouped_allreduce_async, tensors, average, name, compression, op, prescale_factor, postscale_factor, process_set
    )


def allgather_async(tensor, name=None, process_set=global_process_set):
    array = as_array(tensor)
    return DISPATCHER.allgather(
        tensor_ref(array), name, lambda result: array_from_result(result, array.dtype), process_set_id(process_set)
    )


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenate every rank's `tensor` along the first dimension (sizes may differ)."""
    return DISPATCHER.run_now(allgather_async, tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of arrays, got {type(tensors).__name__}")
    arrays = [as_array(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
    return DISPATCHER.grouped_allgather(
        [tensor_ref(array) for array in arrays],
        name,
        lambda results: [array_from_result(result, array.dtype) for result, array in zip(results, arrays)],
        process_set_id(process_set),
    )


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather a list of arrays as one negotiated unit; returns a list."""
    return DISPATCHER.run_now(grouped_allgather_async, tensors, name, process_set)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    array = as_array(tensor)
    output, output_ref = new_output_like(array)
    return DISPATCHER.broadcast(
        tensor_ref(array), output_ref, root_rank, name, lambda result: output, process_set_id(process_set)
    )


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Return root_rank's `tensor` on every rank (root_rank is a global rank)."""
    return DISPATCHER.run_now(broadcast_async, tensor, root_rank, name, process_set)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    array = as_array(tensor)

    def finish(result):
        received = array_from_result(result, array.dtype)
        if splits is None:
            return received
        return received, np.asarray(result.received_splits, dtype=np.int32)

    return DISPATCHER.alltoall(tensor_ref(array), splits, name, finish, process_set_id(process_set))


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Send splits[i] rows of `tensor` to rank i (equal shares without splits).

    Returns the received rows in rank order, and with splits given also the number
    of rows received from each rank.
    """
    return DISPATCHER.run_now(alltoall_async, tensor, splits, name, process_set)


def reducescatter_async(
    tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    array = as_array(tensor)
    scaling = Scaling(op, prescale_factor, postscale_factor)
    return DISPATCHER.reducescatter(
        tensor_ref(array),
        scaling,
        name,
        lambda result: array_from_result(result, array.dtype),
        process_set_id(process_set),
    )


def reducescatter(
    tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Reduce across ranks and return this rank's share of the first dimension
    (the first `rows % size` ranks get one extra row)."""
    return DISPATCHER.run_now(reducescatter_async, tensor, name, op, prescale_factor, postscale_factor, process_set)


def grouped_reducescatter_async(
    tensors, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of arrays, got {type(tensors).__name__}")
    arrays = [as_array(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
    return DISPATCHER.grouped_reducescatter(
        [tensor_ref(array) for array in arrays],
        Scaling(op, prescale_factor, postscale_factor),
        name,
        lambda results: [array_from_result(result, array.dtype) for result, array in zip(results, arrays)],
        process_set_id(process_set),
    )


def grouped_reducescatter(
    tensors, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Reducescatter a list of arrays as one negotiated unit; returns a list of shares."""
    return DISPATCHER.run_now(
        grouped_reducescatter_async, tensors, name, op, prescale_factor, postscale_factor, process_set
    )


def poll(handle):
    return DISPATCHER.poll(handle)


def synchronize(handle):
    return DISPATCHER.synchronize(handle)


def barrier(process_set=global_process_set):
    """Return once every rank (of the process set) has called barrier()."""
    DISPATCHER.run_now(DISPATCHER.barrier, process_set_id(process_set))


def join():
    """Stop contributing: until every rank has joined, this rank takes part in the
    others' allreduces with zeros. Returns the last rank to join."""
    return synchronize(DISPATCHER.join())


_OBJECTS = ObjectCollectives(broadcast, allgather, NAMER, basics.rank)
broadcast_object = _OBJECTS.broadcast_object
allgather_object = _OBJECTS.allgather_object
