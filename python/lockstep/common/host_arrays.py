"""Conversion between numpy arrays and what the core reads and writes."""

import numpy as np

from lockstep import _core
from lockstep.common.dispatch import TensorRef

try:  # bfloat16 arrays come from ml_dtypes; without it bfloat16 is simply unavailable.
    import ml_dtypes

    _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a pinned requirement
    _BFLOAT16 = None

CORE_DTYPES = {
    np.dtype(np.uint8): _core.DataType.UINT8,
    np.dtype(np.uint16): _core.DataType.UINT16,
    np.dtype(np.int8): _core.DataType.INT8,
    np.dtype(np.int16): _core.DataType.INT16,
    np.dtype(np.int32): _core.DataType.INT32,
    np.dtype(np.int64): _core.DataType.INT64,
    np.dtype(np.float16): _core.DataType.FLOAT16,
    np.dtype(np.float32): _core.DataType.FLOAT32,
    np.dtype(np.float64): _core.DataType.FLOAT64,
    np.dtype(np.bool_): _core.DataType.BOOL,
}
if _BFLOAT16 is not None:
    CORE_DTYPES[_BFLOAT16] = _core.DataType.BFLOAT16

SUPPORTED_DTYPE_NAMES = ", ".join(dtype.name for dtype in CORE_DTYPES)


def as_array(tensor, what="tensor"):
    """The numpy array behind `tensor`, checked for a supported dtype, as one
    C-contiguous block the core can read.

    Numpy scalars become 0-d arrays. Non-contiguous arrays (slices, transposes) are
    copied, as the torch frontend does: the core needs one dense block.
    """
    if isinstance(tensor, np.generic):
        tensor = np.asarray(tensor)
    elif not isinstance(tensor, np.ndarray):
        raise TypeError(f"{what} must be a numpy.ndarray or numpy scalar, got {type(tensor).__name__}")
    core_dtype(tensor.dtype, what)
    if not tensor.flags.c_contiguous:
        return np.ascontiguousarray(tensor)
    return tensor


def core_dtype(dtype, what="tensor"):
    try:
        return CORE_DTYPES[dtype]
    except KeyError:
        if dtype.isnative is False:
            detail = f"non-native byte order {dtype.str}"
        else:
            detail = str(dtype)
        raise TypeError(f"{what} has unsupported dtype {detail}; supported dtypes: {SUPPORTED_DTYPE_NAMES}") from None


def tensor_ref(array):
    """A TensorRef for an array already checked by as_array."""
    return TensorRef(_core.buffer_address(array), CORE_DTYPES[array.dtype], array.shape, array)


# Result arrays this large take recycled memory from the core (see empty_like()).
RECYCLED_BYTES = _core.RECYCLED_HOST_BUFFER_BYTES


def empty_like(array):
    """np.empty_like for a C-contiguous ndarray, but a result of RECYCLED_BYTES or more
    lives in a buffer recycled by the core: glibc unmaps large freed blocks, and a
    result that faults its pages in afresh every step cost several times the collective
    (docs/PERFORMANCE.md, "Result buffers"). The buffer returns to the core's cache
    when the last array viewing it goes. Small arrays cost what np.empty_like does:
    this runs on every small allreduce."""
    if array.nbytes < RECYCLED_BYTES:
        return np.empty_like(array)
    return _core.empty_array(array.dtype, array.shape)


def new_output_like(array):
    """A fresh array for the core to write the result into, and its TensorRef."""
    output = empty_like(array)
    return output, tensor_ref(output)


def array_from_result(result, dtype):
    """The result the core allocated, viewed zero-copy as an array of `dtype`.

    The array keeps `result` (and so the core's buffer) alive.
    """
    if not result.has_buffer:
        if int(np.prod(result.shape)) != 0:
            raise _core.LockstepError(f"internal error: a result of shape {result.shape} came without data")
        return np.empty(result.shape, dtype=dtype)
    return np.frombuffer(result, dtype=np.uint8).view(dtype).reshape(result.shape)
