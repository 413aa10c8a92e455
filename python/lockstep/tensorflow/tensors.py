"""What TensorFlow tensors the core accepts, and conversion between eager tensors
and the numpy arrays the host ops read and write."""

import numpy as np
import tensorflow as tf

# The core's element types; bfloat16 crosses as ml_dtypes.bfloat16, which is what
# TensorFlow's own numpy conversion produces.
SUPPORTED_DTYPES = (
    tf.uint8,
    tf.int8,
    tf.int16,
    tf.int32,
    tf.int64,
    tf.float16,
    tf.bfloat16,
    tf.float32,
    tf.float64,
    tf.bool,
)
SUPPORTED_DTYPE_NAMES = ", ".join(dtype.name for dtype in SUPPORTED_DTYPES)


def as_tensor(value, what="tensor"):
    """`value` (tf.Tensor, tf.Variable or anything convertible) as a tensor of a
    dtype the core supports."""
    if isinstance(value, tf.IndexedSlices):
        raise TypeError(f"{what} is a tf.IndexedSlices; this op needs a dense tensor")
    tensor = tf.convert_to_tensor(value)
    check_dtype(tensor.dtype, what)
    return tensor


def check_dtype(dtype, what="tensor"):
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{what} has unsupported dtype {dtype.name}; supported dtypes: {SUPPORTED_DTYPE_NAMES}")


def eager_array(tensor):
    """The host memory behind an eager tensor, zero-copy (the array keeps it alive).

    0-d tensors convert to numpy scalars, which are copied into a 0-d array
    (np.asarray cannot take a bfloat16 scalar)."""
    if tensor.shape.rank == 0:
        return np.array(tensor.numpy())
    return np.asarray(tensor)


def from_array(array, dtype):
    """An eager tensor holding `array` (a copy into TensorFlow-owned memory)."""
    return tf.convert_to_tensor(array, dtype=dtype)
