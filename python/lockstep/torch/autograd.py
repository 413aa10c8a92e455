"""The synchronous collectives, differentiable with Horovod's gradient definitions.

Every rank must run the backward pass too: each gradient is itself a collective.
  allreduce      -> the same allreduce (op and scale factors) of the gradient
  allgather      -> Average-allreduce of the gradient, this rank's rows of it
  broadcast      -> Average-allreduce of the gradient on the root, zeros elsewhere
  alltoall       -> alltoall of the gradient back along the received splits
  reducescatter  -> allgather of the gradient (times the size for Sum), times the
                    forward's scale factors
The grouped forms have the grouped forms of the same gradients. On a process set,
the gradients' collectives run on the same set.
"""

import torch

from lockstep.common import basics, validation
from lockstep.common.ops import Average, Sum, handle_average_backwards_compatibility
from lockstep.common.process import DISPATCHER
from lockstep.common.process_sets import global_process_set, process_set_id, process_set_size
from lockstep.torch import mpi_ops
from lockstep.torch.compression import Compression
from lockstep.torch.tensors import CORE_DTYPES

# Module-level names for allreduce's inline path: each saves an attribute lookup per op.
_Tensor = torch.Tensor
_STRIDED = torch.strided
_NO_COMPRESSION = Compression.none
_empty_like = torch.empty_like
_is_grad_enabled = torch.is_grad_enabled


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, prescale_factor, postscale_factor, process_set):
        ctx.reduction = (op, prescale_factor, postscale_factor, process_set)
        return mpi_ops.allreduce_now(tensor, name, op, prescale_factor, postscale_factor, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale_factor, postscale_factor, process_set = ctx.reduction
        grad = allreduce(
            grad_output,
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            process_set=process_set,
        )
        return grad, None, None, None, None, None


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, name, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.reduction = (op, prescale_factor, postscale_factor, process_set)
        return tuple(
            DISPATCHER.run_now(
                mpi_ops.grouped_allreduce_async,
                list(tensors),
                name=name,
                op=op,
                prescale_factor=prescale_factor,
                postscale_factor=postscale_factor,
                process_set=process_set,
            )
        )

    @staticmethod
    def backward(ctx, *grad_outputs):
        op, prescale_factor, postscale_factor, process_set = ctx.reduction
        grads = grouped_allreduce(
            list(grad_outputs),
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            process_set=process_set,
        )
        return (None, None, None, None, None, *grads)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        gathered = DISPATCHER.run_now(mpi_ops.allgather_async, tensor, name=name, process_set=process_set)
        ctx.rows = tensor.shape[0]
        ctx.process_set = process_set
        return gathered

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        rows_per_rank = allgather(torch.tensor([ctx.rows], dtype=torch.int64), process_set=ctx.process_set)
        offset = int(rows_per_rank[: _rank_in(ctx.process_set)].sum())
        return grad.narrow(0, offset, ctx.rows), None, None


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return DISPATCHER.run_now(mpi_ops.broadcast_async, tensor, root_rank, name=name, process_set=process_set)

    @staticmethod
    def backward(ctx, grad_output):
        # Every rank of the set takes part, root or not.
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if basics.rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None, None


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received_splits = DISPATCHER.run_now(
            mpi_ops.alltoall_async, tensor, splits, name=name, process_set=process_set
        )
        ctx.received_splits = received_splits
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, _grad_received_splits):
        grad, _ = alltoall(grad_output, splits=ctx.received_splits, process_set=ctx.process_set)
        return grad, None, None, None


def _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set):
    """Horovod's reducescatter gradient is the allgather of the output gradients, times
    the size for Sum (as for allreduce, the collective applied to the gradients);
    scale factors multiply it as they multiply the forward result."""
    scale = float(prescale_factor) * float(postscale_factor)  # validated by the forward op
    return scale * process_set_size(process_set_id(process_set)) if op == Sum else scale


def _rank_in(process_set):
    return basics.rank() if process_set is global_process_set else process_set.rank()


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, prescale_factor, postscale_factor, process_set):
        reduced = DISPATCHER.run_now(
            mpi_ops.reducescatter_async,
            tensor,
            name=name,
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            process_set=process_set,
        )
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set)
        ctx.process_set = process_set
        return reduced

    @staticmethod
    def backward(ctx, grad_output):
        return allgather(grad_output, process_set=ctx.process_set) * ctx.scale, None, None, None, None, None


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, name, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set)
        ctx.process_set = process_set
        return tuple(
            DISPATCHER.run_now(
                mpi_ops.grouped_reducescatter_async,
                list(tensors),
                name=name,
                op=op,
                prescale_factor=prescale_factor,
                postscale_factor=postscale_factor,
                process_set=process_set,
            )
        )

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allgather([grad.contiguous() for grad in grad_outputs], process_set=ctx.process_set)
        return (None, None, None, None, None, *[grad * ctx.scale for grad in grads])


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        gathered = tuple(
            DISPATCHER.run_now(mpi_ops.grouped_allgather_async, list(tensors), name=name, process_set=process_set)
        )
        ctx.rows = [tensor.shape[0] for tensor in tensors]  # checked above: each has a first dimension
        ctx.process_set = process_set
        return gathered

    @staticmethod
    def backward(ctx, *grad_outputs):
        # As for allgather: average the gradients, and keep this rank's rows.
        process_set = ctx.process_set
        grads = grouped_allreduce([grad.contiguous() for grad in grad_outputs], op=Average, process_set=process_set)
        rows = allgather(torch.tensor([ctx.rows], dtype=torch.int64), process_set=process_set)  # size x tensors
        offsets = rows[: _rank_in(process_set)].sum(dim=0)
        return (
            None,
            None,
            *[grad.narrow(0, int(offset), count) for grad, offset, count in zip(grads, offsets, ctx.rows)],
        )


def allreduce(
    tensor,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduce `tensor` across ranks (Average by default) and return a new tensor."""
    # The latency-critical case, inline (a dense CPU tensor of a core dtype that needs
    # no graph, without compression or average=): a 4-byte op is a few microseconds,
    # and the calls this skips (the average= resolution, the graph check, allreduce_now)
    # were about 0.2 us of it. The core decides whether op, factors and name are plain
    # (DISPATCHER.run_allreduce). Any other tensor takes the general path below, which
    # has the same result and raises the errors.
    if (
        tensor.__class__ is _Tensor
        and average is None
        and compression is _NO_COMPRESSION
        and tensor.is_cpu
        and tensor.layout is _STRIDED
        and tensor.is_contiguous()
        and not (tensor.requires_grad and _is_grad_enabled())
    ):
        dtype = CORE_DTYPES.get(tensor.dtype)
        if dtype is not None:
            output = _empty_like(tensor)
            DISPATCHER.run_allreduce(
                dtype,
                tensor.shape,
                tensor.data_ptr(),
                output.data_ptr(),
                Average if op is None else op,
                prescale_factor,
                postscale_factor,
                name,
                0 if process_set is global_process_set else process_set_id(process_set),
            )
            return output
    op = handle_average_backwards_compatibility(op, average)
    if compression is Compression.none and not _needs_graph(tensor):
        # Autograd's bookkeeping would only add to the op's time.
        return mpi_ops.allreduce_now(tensor, name, op, prescale_factor, postscale_factor, process_set)
    compression = validation.check_compressor(compression) or Compression.none
    compressed, context = compression.compress(tensor)
    if _needs_graph(compressed):
        reduced = _Allreduce.apply(compressed, op, name, prescale_factor, postscale_factor, process_set)
    else:
        reduced = mpi_ops.allreduce_now(compressed, name, op, prescale_factor, postscale_factor, process_set)
    return compression.decompress(reduced, context)


def _check_list(tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of torch.Tensor, got {type(tensors).__name__}")


def _needs_graph(tensor):
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled()


def grouped_allreduce(
    tensors,
    average=None,
    name=None,
    compression=Compression.none,
    op=None,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduce a list of tensors as one negotiated, fused unit; returns a list."""
    _check_list(tensors)
    op = handle_average_backwards_compatibility(op, average)
    compression = validation.check_compressor(compression) or Compression.none
    compressed = [compression.compress(tensor) for tensor in tensors]
    reduced = _GroupedAllreduce.apply(
        op, name, prescale_factor, postscale_factor, process_set, *[t for t, _ in compressed]
    )
    return [compression.decompress(tensor, context) for tensor, (_, context) in zip(reduced, compressed)]


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenate every rank's `tensor` along the first dimension (sizes may differ)."""
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather a list of tensors as one negotiated unit; returns a list."""
    _check_list(tensors)
    return list(_GroupedAllgather.apply(name, process_set, *tensors))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Return root_rank's `tensor` (root_rank is a global rank) on every rank as a new tensor."""
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Send splits[i] rows of `tensor` to rank i (equal shares without splits).

    Returns the received rows in rank order; with splits given, also an int32
    tensor of the rows received from each rank.
    """
    output, received_splits = _Alltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received_splits)


def reducescatter(
    tensor,
    name=None,
    compression=Compression.none,
    op=Average,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reduce across ranks and return this rank's share of the first dimension."""
    compression = validation.check_compressor(compression) or Compression.none
    compressed, context = compression.compress(tensor)
    reduced = _Reducescatter.apply(compressed, op, name, prescale_factor, postscale_factor, process_set)
    return compression.decompress(reduced, context)


def grouped_reducescatter(
    tensors,
    name=None,
    compression=Compression.none,
    op=Average,
    prescale_factor=1.0,
    postscale_factor=1.0,
    process_set=global_process_set,
):
    """Reducescatter a list of tensors as one negotiated unit; returns this rank's
    share of each, in a list."""
    _check_list(tensors)
    compression = validation.check_compressor(compression) or Compression.none
    compressed = [compression.compress(tensor) for tensor in tensors]
    reduced = _GroupedReducescatter.apply(
        op, name, prescale_factor, postscale_factor, process_set, *[t for t, _ in compressed]
    )
    return [compression.decompress(tensor, context) for tensor, (_, context) in zip(reduced, compressed)]
