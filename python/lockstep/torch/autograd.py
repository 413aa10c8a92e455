"""The synchronous collectives, differentiable with Horovod's gradient definitions.

Every rank must run the backward pass too: each gradient is itself a collective.
  allreduce      -> the same allreduce (op and scale factors) of the gradient
  allgather      -> Average-allreduce of the gradient, this rank's rows of it
  broadcast      -> Average-allreduce of the gradient on the root, zeros elsewhere
  alltoall       -> alltoall of the gradient back along the received splits
  reducescatter  -> allgather of the gradient (times the size for Sum), times the
                    forward's scale factors
The grouped forms have the grouped forms of the same gradients.
"""

import torch

from lockstep.common import basics, validation
from lockstep.common.ops import Average, Sum, handle_average_backwards_compatibility
from lockstep.torch import mpi_ops
from lockstep.torch.compression import Compression


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, prescale_factor, postscale_factor):
        ctx.reduction = (op, prescale_factor, postscale_factor)
        return mpi_ops.allreduce_now(tensor, name, op, prescale_factor, postscale_factor)

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale_factor, postscale_factor = ctx.reduction
        grad = allreduce(grad_output, op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor)
        return grad, None, None, None, None


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, name, prescale_factor, postscale_factor, *tensors):
        ctx.reduction = (op, prescale_factor, postscale_factor)
        return tuple(mpi_ops.synchronize(
            mpi_ops.grouped_allreduce_async(list(tensors), name=name, op=op, prescale_factor=prescale_factor,
                                            postscale_factor=postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        op, prescale_factor, postscale_factor = ctx.reduction
        grads = grouped_allreduce(list(grad_outputs), op=op, prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor)
        return (None, None, None, None, *grads)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        gathered = mpi_ops.synchronize(mpi_ops.allgather_async(tensor, name=name))
        ctx.rows = tensor.shape[0]
        return gathered

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average)
        rows_per_rank = allgather(torch.tensor([ctx.rows], dtype=torch.int64))
        offset = int(rows_per_rank[: basics.rank()].sum())
        return grad.narrow(0, offset, ctx.rows), None


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return mpi_ops.synchronize(mpi_ops.broadcast_async(tensor, root_rank, name=name))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average)  # every rank takes part, root or not
        if basics.rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        output, received_splits = mpi_ops.synchronize(mpi_ops.alltoall_async(tensor, splits, name=name))
        ctx.received_splits = received_splits
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, _grad_received_splits):
        grad, _ = alltoall(grad_output, splits=ctx.received_splits)
        return grad, None, None


def _reducescatter_grad_scale(op, prescale_factor, postscale_factor):
    """Horovod's reducescatter gradient is the allgather of the output gradients, times
    the size for Sum (as for allreduce, the collective applied to the gradients);
    scale factors multiply it as they multiply the forward result."""
    scale = float(prescale_factor) * float(postscale_factor)  # validated by the forward op
    return scale * basics.size() if op == Sum else scale


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, prescale_factor, postscale_factor):
        reduced = mpi_ops.synchronize(
            mpi_ops.reducescatter_async(tensor, name=name, op=op, prescale_factor=prescale_factor,
                                        postscale_factor=postscale_factor))
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor)
        return reduced

    @staticmethod
    def backward(ctx, grad_output):
        return allgather(grad_output) * ctx.scale, None, None, None, None


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, name, prescale_factor, postscale_factor, *tensors):
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor)
        return tuple(mpi_ops.synchronize(mpi_ops.grouped_reducescatter_async(
            list(tensors), name=name, op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allgather([grad.contiguous() for grad in grad_outputs])
        return (None, None, None, None, *[grad * ctx.scale for grad in grads])


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, *tensors):
        gathered = tuple(mpi_ops.synchronize(mpi_ops.grouped_allgather_async(list(tensors), name=name)))
        ctx.rows = [tensor.shape[0] for tensor in tensors]  # checked above: each has a first dimension
        return gathered

    @staticmethod
    def backward(ctx, *grad_outputs):
        # As for allgather: average the gradients, and keep this rank's rows.
        grads = grouped_allreduce([grad.contiguous() for grad in grad_outputs], op=Average)
        rows = allgather(torch.tensor([ctx.rows], dtype=torch.int64))  # size x tensors
        offsets = rows[: basics.rank()].sum(dim=0)
        return (None, *[grad.narrow(0, int(offset), count) for grad, offset, count in zip(grads, offsets, ctx.rows)])


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None, prescale_factor=1.0,
              postscale_factor=1.0):
    """Reduce `tensor` across ranks (Average by default) and return a new tensor."""
    op = handle_average_backwards_compatibility(op, average)
    if compression is Compression.none and not _needs_graph(tensor):
        # The latency-critical case: autograd's bookkeeping would only add to it.
        return mpi_ops.allreduce_now(tensor, name, op, prescale_factor, postscale_factor)
    compression = validation.check_compressor(compression) or Compression.none
    compressed, context = compression.compress(tensor)
    if _needs_graph(compressed):
        reduced = _Allreduce.apply(compressed, op, name, prescale_factor, postscale_factor)
    else:
        reduced = mpi_ops.allreduce_now(compressed, name, op, prescale_factor, postscale_factor)
    return compression.decompress(reduced, context)


def _check_list(tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list or tuple of torch.Tensor, got {type(tensors).__name__}")


def _needs_graph(tensor):
    return isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled()


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0):
    """Reduce a list of tensors as one negotiated, fused unit; returns a list."""
    _check_list(tensors)
    op = handle_average_backwards_compatibility(op, average)
    compression = validation.check_compressor(compression) or Compression.none
    compressed = [compression.compress(tensor) for tensor in tensors]
    reduced = _GroupedAllreduce.apply(op, name, prescale_factor, postscale_factor, *[t for t, _ in compressed])
    return [compression.decompress(tensor, context) for tensor, (_, context) in zip(reduced, compressed)]


def allgather(tensor, name=None):
    """Concatenate every rank's `tensor` along the first dimension (sizes may differ)."""
    return _Allgather.apply(tensor, name)


def grouped_allgather(tensors, name=None):
    """Allgather a list of tensors as one negotiated unit; returns a list."""
    _check_list(tensors)
    return list(_GroupedAllgather.apply(name, *tensors))


def broadcast(tensor, root_rank, name=None):
    """Return root_rank's `tensor` on every rank as a new tensor."""
    return _Broadcast.apply(tensor, root_rank, name)


def alltoall(tensor, splits=None, name=None):
    """Send splits[i] rows of `tensor` to rank i (equal shares without splits).

    Returns the received rows in rank order; with splits given, also an int32
    tensor of the rows received from each rank.
    """
    output, received_splits = _Alltoall.apply(tensor, splits, name)
    return output if splits is None else (output, received_splits)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduce across ranks and return this rank's share of the first dimension."""
    compression = validation.check_compressor(compression) or Compression.none
    compressed, context = compression.compress(tensor)
    reduced = _Reducescatter.apply(compressed, op, name, prescale_factor, postscale_factor)
    return compression.decompress(reduced, context)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatter a list of tensors as one negotiated unit; returns this rank's
    share of each, in a list."""
    _check_list(tensors)
    compression = validation.check_compressor(compression) or Compression.none
    compressed = [compression.compress(tensor) for tensor in tensors]
    reduced = _GroupedReducescatter.apply(op, name, prescale_factor, postscale_factor, *[t for t, _ in compressed])
    return [compression.decompress(tensor, context) for tensor, (_, context) in zip(reduced, compressed)]
