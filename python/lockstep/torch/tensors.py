"""Conversion between torch tensors and what the core reads and writes.

Contiguous CPU tensors are handed to the core in place (their data_ptr); only a
non-contiguous tensor is copied, because the core needs one dense block.
"""

import torch

from lockstep import _core
from lockstep.common.dispatch import TensorRef

_CORE_DTYPES = {
    torch.uint8: _core.DataType.UINT8,
    torch.int8: _core.DataType.INT8,
    torch.int16: _core.DataType.INT16,
    torch.int32: _core.DataType.INT32,
    torch.int64: _core.DataType.INT64,
    torch.float16: _core.DataType.FLOAT16,
    torch.bfloat16: _core.DataType.BFLOAT16,
    torch.float32: _core.DataType.FLOAT32,
    torch.float64: _core.DataType.FLOAT64,
    torch.bool: _core.DataType.BOOL,
}

SUPPORTED_DTYPES = tuple(_CORE_DTYPES)
SUPPORTED_DTYPE_NAMES = ", ".join(str(dtype).replace("torch.", "") for dtype in SUPPORTED_DTYPES)


def check_tensor(tensor, what="tensor"):
    """`tensor` if lockstep can send it: a dense CPU tensor of a supported dtype."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_cpu:
        problem = _core.nccl_info()["problem"] or "lockstep's GPU collectives are not implemented yet"
        raise ValueError(
            f"{what} is on device {tensor.device}, but only CPU tensors are supported here (GPU: {problem}); "
            "move it with tensor.cpu()"
        )
    if tensor.layout != torch.strided:
        raise ValueError(f"{what} has layout {tensor.layout}; only dense (strided) tensors are supported")
    core_dtype(tensor.dtype, what)
    return tensor


def core_dtype(dtype, what="tensor"):
    try:
        return _CORE_DTYPES[dtype]
    except KeyError:
        raise TypeError(
            f"{what} has unsupported dtype {str(dtype).replace('torch.', '')}; "
            f"supported dtypes: {SUPPORTED_DTYPE_NAMES}"
        ) from None


def readable(tensor):
    """A dense view of a checked tensor's values for the core to read: the tensor itself
    when contiguous (the core reads its memory, which autograd never sees), otherwise a
    detached contiguous copy."""
    return tensor if tensor.is_contiguous() else tensor.detach().contiguous()


def tensor_ref(tensor):
    """A TensorRef for a contiguous CPU tensor; the ref keeps the tensor alive."""
    # Positional arguments and torch.Size as is: this runs twice on every op.
    return TensorRef(tensor.data_ptr(), _CORE_DTYPES[tensor.dtype], tensor.shape, tensor)


def new_output_like(tensor):
    """A fresh contiguous tensor (no autograd history) for the core to write a result
    into, and its TensorRef."""
    output = torch.empty_like(tensor)  # `tensor` is contiguous, so the output is too
    return output, tensor_ref(output)


class InPlaceTarget:
    """Where an in-place op lets the core write: the tensor itself when contiguous,
    otherwise a dense copy whose result finish() writes back."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.work = readable(tensor)  # what the core writes into

    def ref(self):
        return tensor_ref(self.work)

    def finish(self):
        if self.work is not self.tensor:
            with torch.no_grad():
                self.tensor.copy_(self.work)
        return self.tensor


def tensor_from_result(result, dtype):
    """The result the core allocated, viewed zero-copy as a tensor of `dtype`.

    The tensor keeps `result` (and so the core's buffer) alive.
    """
    shape = tuple(result.shape)
    if not result.has_buffer or _elements(shape) == 0:
        if _elements(shape) != 0:
            raise _core.LockstepError(f"internal error: a result of shape {shape} came without data")
        # torch.frombuffer refuses empty buffers.
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(result, dtype=torch.uint8).view(dtype).reshape(shape)


def _elements(shape):
    count = 1
    for dim in shape:
        count *= dim
    return count
