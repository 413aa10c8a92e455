"""What TensorFlow tensors lockstep's ops accept."""

import tensorflow as tf

# The core's element types (the op library admits exactly these).
SUPPORTED_DTYPES = (
    tf.uint8,
    tf.int8,
    tf.uint16,
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
_SUPPORTED = frozenset(SUPPORTED_DTYPES)  # one hash lookup per op instead of 11 comparisons


def as_tensor(value, what="tensor"):
    """`value` (tf.Tensor, tf.Variable or anything convertible) as a tensor of a
    dtype the core supports."""
    if isinstance(value, tf.IndexedSlices):
        raise TypeError(f"{what} is a tf.IndexedSlices; this op needs a dense tensor")
    tensor = tf.convert_to_tensor(value)
    if tensor.dtype not in _SUPPORTED:
        raise TypeError(f"{what} has unsupported dtype {tensor.dtype.name}; supported dtypes: {SUPPORTED_DTYPE_NAMES}")
    return tensor


def as_tensor_list(values):
    return [as_tensor(value, f"tensors[{index}]") for index, value in enumerate(values)]
