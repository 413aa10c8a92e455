"""Horovod's asynchronous and in-place collectives on torch tensors.

The *_async functions return a handle for poll() and synchronize(); synchronize()
returns the op's result. Out-of-place ops leave their input untouched and return
new tensors; the trailing-underscore forms write the result into the input.
These are not differentiable; lockstep.torch.autograd wraps them for autograd.
"""

import torch

from lockstep.common import gpu
from lockstep.common.dispatch import Scaling
from lockstep.common.ops import Average, handle_average_backwards_compatibility
from lockstep.common.process import DISPATCHER
from lockstep.common.process_sets import global_process_set, process_set_id
from lockstep.common.validation import as_int
from lockstep.torch.tensors import (
    InPlaceTarget,
    check_tensor,
    core_dtype,
    device_and_stream,
    new_output_like,
    order_on_current_stream,
    readable,
    tensor_from_result,
    tensor_ref,
)

# synchronize() orders the stream current then (not only the submission stream) after
# lockstep's GPU work.
DISPATCHER.order_device_results = order_on_current_stream


def allreduce_async(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Start reducing `tensor` across ranks (Average by default) into a new tensor."""
    scaling = Scaling(handle_average_backwards_compatibility(op, average), prescale_factor, postscale_factor)
    source = readable(check_tensor(tensor))
    output, output_ref = new_output_like(source)
    return DISPATCHER.allreduce(
        tensor_ref(source), output_ref, scaling, name, lambda result: output, ps=process_set_id(process_set)
    )


def allreduce_async_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Start reducing `tensor` across ranks in place; synchronize() returns `tensor`."""
    scaling = Scaling(handle_average_backwards_compatibility(op, average), prescale_factor, postscale_factor)
    target = InPlaceTarget(check_tensor(tensor))
    ref = target.ref()
    return DISPATCHER.allreduce(ref, ref, scaling, name, lambda result: target.finish(), ps=process_set_id(process_set))


def allreduce_(
    tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Reduce `tensor` across ranks in place and return it."""
    op = handle_average_backwards_compatibility(op, average)
    target = InPlaceTarget(check_tensor(tensor))
    work = target.work
    address = work.data_ptr()
    device, stream = (-1, 0) if work.is_cpu else device_and_stream(work)
    DISPATCHER.run_allreduce(
        core_dtype(work.dtype),
        work.shape,
        address,
        address,
        op,
        prescale_factor,
        postscale_factor,
        name,
        process_set_id(process_set),
        device,
        stream,
    )
    return target.finish()


def allreduce_now(
    tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Reduce `tensor` across ranks into a new tensor, waiting in a single call into the
    core: the synchronous allreduce without a handle (not differentiable)."""
    source = readable(check_tensor(tensor))
    output = torch.empty_like(source)  # `source` is contiguous, so the output is too
    device, stream = (-1, 0) if source.is_cpu else device_and_stream(source)
    DISPATCHER.run_allreduce(
        core_dtype(source.dtype),
        source.shape,
        source.data_ptr(),
        output.data_ptr(),
        op,
        prescale_factor,
        postscale_factor,
        name,
        process_set_id(process_set),
        device,
        stream,
    )
    return output


def grouped_allreduce_async(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Start reducing a list of tensors as one negotiated, fused unit into new tensors."""
    scaling = Scaling(handle_average_backwards_compatibility(op, average), prescale_factor, postscale_factor)
    sources = [readable(tensor) for tensor in _checked_list(tensors)]
    outputs = [new_output_like(source) for source in sources]
    return DISPATCHER.grouped_allreduce(
        [tensor_ref(source) for source in sources],
        [ref for _, ref in outputs],
        scaling,
        name,
        lambda results: [output for output, _ in outputs],
        ps=process_set_id(process_set),
    )


def grouped_allreduce_async_(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Start reducing a list of tensors in place as one unit; synchronize() returns the list."""
    scaling = Scaling(handle_average_backwards_compatibility(op, average), prescale_factor, postscale_factor)
    targets = [InPlaceTarget(tensor) for tensor in _checked_list(tensors)]
    refs = [target.ref() for target in targets]
    return DISPATCHER.grouped_allreduce(
        refs,
        refs,
        scaling,
        name,
        lambda results: [target.finish() for target in targets],
        ps=process_set_id(process_set),
    )


def grouped_allreduce_(
    tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Reduce a list of tensors in place as one unit and return the list."""
    return DISPATCHER.run_now(
        grouped_allreduce_async_, tensors, average, name, op, prescale_factor, postscale_factor, process_set
    )


def batched_allreduce_async_(
    tensors,
    names,
    op=Average,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
    wake_background=True,
    grouped=False,
):
    """lockstep's own: start reducing each tensor in place, each under its own name (as
    allreduce_async_ does), handed over in one call so that they usually fuse in one
    cycle; `grouped`: negotiated as one unit (as grouped_allreduce_async_, whose member
    names are "<name>.<index>"). synchronize() returns the list. wake_background
    False: synchronize() follows at once, and its thread runs the cycle itself."""
    scaling = Scaling(op, prescale_factor, postscale_factor)
    targets = [InPlaceTarget(check_tensor(tensor)) for tensor in tensors]
    refs = [target.ref() for target in targets]
    return DISPATCHER.allreduce_batch(
        refs,
        refs,
        scaling,
        names,
        lambda results: [target.finish() for target in targets],
        ps=process_set_id(process_set),
        wake_background=wake_background,
        grouped=grouped,
    )


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Start concatenating every rank's `tensor` along the first dimension."""
    source = readable(check_tensor(tensor))
    return DISPATCHER.allgather(
        tensor_ref(source),
        name,
        lambda result: tensor_from_result(result, source.dtype, source),
        ps=process_set_id(process_set),
    )


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Start allgathering a list of tensors as one negotiated unit; synchronize()
    returns the list of gathered tensors."""
    sources = [readable(tensor) for tensor in _checked_list(tensors)]
    return DISPATCHER.grouped_allgather(
        [tensor_ref(source) for source in sources],
        name,
        lambda results: [tensor_from_result(result, source.dtype, source) for result, source in zip(results, sources)],
        ps=process_set_id(process_set),
    )


def grouped_reducescatter_async(
    tensors, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Start reducescattering a list of tensors as one negotiated unit; synchronize()
    returns the list of this rank's shares."""
    sources = [readable(tensor) for tensor in _checked_list(tensors)]
    return DISPATCHER.grouped_reducescatter(
        [tensor_ref(source) for source in sources],
        Scaling(op, prescale_factor, postscale_factor),
        name,
        lambda results: [tensor_from_result(result, source.dtype, source) for result, source in zip(results, sources)],
        ps=process_set_id(process_set),
    )


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Start copying root_rank's `tensor` into a new tensor on every rank."""
    source = readable(check_tensor(tensor))
    output, output_ref = new_output_like(source)
    return DISPATCHER.broadcast(
        tensor_ref(source), output_ref, root_rank, name, lambda result: output, ps=process_set_id(process_set)
    )


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Start overwriting `tensor` with root_rank's values; synchronize() returns `tensor`."""
    target = InPlaceTarget(check_tensor(tensor))
    ref = target.ref()
    return DISPATCHER.broadcast(
        ref, ref, root_rank, name, lambda result: target.finish(), ps=process_set_id(process_set)
    )


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrite `tensor` with root_rank's values and return it."""
    return DISPATCHER.run_now(broadcast_async_, tensor, root_rank, name, process_set)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Start sending splits[i] rows of `tensor` to rank i (equal shares without splits).

    synchronize() returns (received rows in rank order, int32 rows received per rank).
    """
    source = readable(check_tensor(tensor))
    splits = _split_counts(splits)

    def finish(result):
        received_splits = torch.tensor(list(result.received_splits), dtype=torch.int32)
        return tensor_from_result(result, source.dtype, source), received_splits

    return DISPATCHER.alltoall(tensor_ref(source), splits, name, finish, ps=process_set_id(process_set))


def _split_counts(splits):
    """A splits tensor on the host; like Horovod, one that does not hold integers is a
    ValueError (lists are checked by the shared validation)."""
    if not isinstance(splits, torch.Tensor):
        return splits
    if splits.dtype.is_floating_point or splits.dtype.is_complex or splits.dtype == torch.bool:
        raise ValueError(f"alltoall splits must be a tensor of integers, got dtype {splits.dtype}")
    return splits.detach().cpu()


def reducescatter_async(
    tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set
):
    """Start reducing across ranks; the result is this rank's share of the first
    dimension (the first `rows % size` ranks get one extra row)."""
    source = readable(check_tensor(tensor))
    scaling = Scaling(op, prescale_factor, postscale_factor)
    return DISPATCHER.reducescatter(
        tensor_ref(source),
        scaling,
        name,
        lambda result: tensor_from_result(result, source.dtype, source),
        ps=process_set_id(process_set),
    )


def poll(handle):
    """True when synchronize(handle) would return without blocking."""
    return DISPATCHER.poll(handle)


def synchronize(handle):
    """Wait for an async op and return its result; raises LockstepError if it failed."""
    return DISPATCHER.synchronize(handle)


def barrier(process_set=global_process_set):
    """Return once every rank has called barrier()."""
    DISPATCHER.run_now(DISPATCHER.barrier, process_set_id(process_set))


def join(device=-1):
    """Stop contributing data: until every rank has joined, this rank takes part in
    the others' allreduces with zeros. Returns the rank that joined last.

    `device`: the GPU this process's collectives run on (hvd.local_rank() when pinned
    as Horovod documents), where the zeros stand in for the GPU collectives the other
    ranks still run. As in Horovod, a build or machine without the GPU path runs the
    join on the CPU whatever the ordinal.
    """
    device = as_int(device, "device (a CUDA device ordinal, or -1 for the CPU)")
    if device < -1:
        raise ValueError(f"device must be -1 (the CPU) or a device ordinal, got {device}")
    if device < 0 or gpu.gpu_path_problem() is not None:
        return synchronize(DISPATCHER.join())
    gpu.DEVICE_PIN.check(device, "join's device")
    return synchronize(DISPATCHER.join(device, torch.cuda.current_stream(device).cuda_stream))


def _checked_list(tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of torch.Tensor, got {type(tensors).__name__}")
    return [check_tensor(tensor, f"tensors[{index}]") for index, tensor in enumerate(tensors)]
