"""Conversion between torch tensors and what the core reads and writes.

Contiguous tensors are handed to the core in place (their data_ptr); only a
non-contiguous tensor is copied, because the core needs one dense block.

CUDA tensors travel with the stream that is current on their device when they are
submitted: the core waits on it (an event, not a host stall) before it reads them.
Only when the op is synchronized does that stream, and the one current then if it is
another, wait on lockstep's work (an event again): kernels queued in between, the
rest of backward, run alongside the collective. Results that the core allocates on
the device (allgather, alltoall, reducescatter) are copied into a torch tensor on the
current stream when the op is synchronized, so torch's caching allocator owns every
tensor a user sees.
"""

import torch

from lockstep import _core
from lockstep.common import gpu
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

CORE_DTYPES = _CORE_DTYPES  # for frontends' inline fast paths
SUPPORTED_DTYPES = tuple(_CORE_DTYPES)
SUPPORTED_DTYPE_NAMES = ", ".join(str(dtype).replace("torch.", "") for dtype in SUPPORTED_DTYPES)


def check_tensor(tensor, what="tensor"):
    """`tensor` if lockstep can send it: a dense CPU tensor, or a CUDA tensor where the GPU
    path runs, of a supported dtype."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_cpu:
        _check_device(tensor, what)
    if tensor.layout != torch.strided:
        raise ValueError(f"{what} has layout {tensor.layout}; only dense (strided) tensors are supported")
    core_dtype(tensor.dtype, what)
    return tensor


def _check_device(tensor, what):
    if not tensor.is_cuda:
        raise ValueError(
            f"{what} is on device {tensor.device}, but lockstep reduces CPU and CUDA (GPU) tensors "
            "only; move it with tensor.cpu()"
        )
    if gpu.gpu_path_problem() is not None:
        raise ValueError(gpu.refusal(what, tensor.device))
    gpu.DEVICE_PIN.check(tensor.device.index, what)


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
    """A TensorRef for a checked contiguous tensor; the ref keeps the tensor alive."""
    # Positional arguments and torch.Size as is: this runs twice on every op.
    if tensor.is_cpu:
        return TensorRef(tensor.data_ptr(), _CORE_DTYPES[tensor.dtype], tensor.shape, tensor)
    device, stream = device_and_stream(tensor)
    return TensorRef(tensor.data_ptr(), _CORE_DTYPES[tensor.dtype], tensor.shape, tensor, device, stream)


def device_and_stream(tensor):
    """(device ordinal, current stream as an int) for a checked CUDA tensor the core is
    about to use on that stream.

    The tensor is recorded as used on the stream: were it allocated on another one (a
    gradient made on a side stream), torch's caching allocator would otherwise hand its
    memory out again on that stream once it is freed, with nothing ordering that after
    lockstep's work. synchronize() orders the stream after lockstep's stream, so the
    record covers lockstep's use too. No host synchronization is involved.
    """
    device = tensor.device.index
    stream = torch.cuda.current_stream(device)
    tensor.record_stream(stream)
    return device, stream.cuda_stream


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


def tensor_from_result(result, dtype, like):
    """The result the core allocated for an op on `like`, as a tensor of `dtype` on
    like's device.

    Host results are viewed zero-copy (the tensor keeps `result`, and so the core's
    buffer, alive). Device results are copied on the current stream into a tensor of
    torch's allocator; the core frees its buffer in stream order after that copy.
    """
    shape = tuple(result.shape)
    if like.is_cuda:
        return _device_tensor_from_result(result, dtype, shape, like.device)
    return _host_tensor_from_result(result, dtype, shape)


def _host_tensor_from_result(result, dtype, shape):
    if not result.has_buffer or _elements(shape) == 0:
        if _elements(shape) != 0:
            raise _core.LockstepError(f"internal error: a result of shape {shape} came without data")
        # torch.frombuffer refuses empty buffers.
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(result, dtype=torch.uint8).view(dtype).reshape(shape)


class _DeviceBytes:
    """A core Result's device memory as raw bytes through the CUDA Array Interface, the
    one way torch adopts a foreign device pointer without a copy. stream None: the
    synchronize() that returned the Result already ordered the current stream after the
    core's writes. Holding the Result keeps its memory alive while torch's view of it exists."""

    def __init__(self, result):
        self._result = result
        self.__cuda_array_interface__ = {
            "shape": (result.nbytes,),
            "typestr": "|u1",
            "data": (result.data_ptr, False),
            "version": 3,
            "stream": None,
        }


def order_on_current_stream(results):
    """Makes the stream current at synchronize() wait on lockstep's GPU work for these
    core Results (the core's wait() already ordered the stream each op was submitted
    on): a handle may be synchronized under another torch.cuda.stream(...)."""
    for result in results:
        if result.has_gpu_done:
            current = torch.cuda.current_stream(gpu.DEVICE_PIN.device).cuda_stream
            if current != result.gpu_stream:
                result.order_stream(current)


def _free_after_current_stream(result, device):
    """The core frees a device result on its stream after an event recorded on the op's
    submission stream when the Result is dropped: if the copy out ran on another stream,
    order the submission stream after that copy first."""
    current = torch.cuda.current_stream(device)
    if current.cuda_stream == result.gpu_stream:
        return
    submitted = (
        torch.cuda.default_stream(device)
        if result.gpu_stream == 0
        else torch.cuda.ExternalStream(result.gpu_stream, device=device)
    )
    submitted.wait_stream(current)


def _device_tensor_from_result(result, dtype, shape, device):
    if _elements(shape) == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    if result.device < 0:
        # A core that staged the op through host memory returned host bytes. A rare
        # path (LOCKSTEP_GPU_OPERATIONS=mpi keeps results on the device too); the copy
        # from pageable memory may block the host.
        return _host_tensor_from_result(result, dtype, shape).to(device)
    if result.device != device.index:
        raise _core.LockstepError(f"internal error: the result of an op on {device} came back on GPU {result.device}")
    view = torch.as_tensor(_DeviceBytes(result), device=device)
    copy = view.view(dtype).reshape(shape).clone()
    _free_after_current_stream(result, device)
    return copy


def _elements(shape):
    count = 1
    for dim in shape:
        count *= dim
    return count
