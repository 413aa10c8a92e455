"""SyncBatchNormalization: batch normalization whose batch statistics cover the
global batch (every rank's samples), for small per-rank batches."""

import tensorflow as tf

from lockstep.common.ops import Sum
from lockstep.keras.keras_line import LEGACY, keras
from lockstep.tensorflow.mpi_ops import grouped_allreduce

# Keras 2 options Keras 3's layer lacks, with the values that mean "not used": a
# ported script passing those keeps working; other values would change the
# layer's maths, so they are refused rather than dropped.
_KERAS2_OPTIONS_OFF = {
    "renorm": (False,),
    "renorm_clipping": (None,),
    "virtual_batch_size": (None,),
    "adjustment": (None,),
}
_KERAS2_OPTIONS_ANY = ("renorm_momentum",)  # only read with renorm=True


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """keras.layers.BatchNormalization with moments reduced across ranks.

    In training, each rank sums its samples, their squares and their count; one
    grouped Sum-allreduce combines them, and every rank normalizes with the global
    mean and variance (so all ranks' moving statistics stay identical). Gradients
    flow back through the allreduce. Inference uses the moving statistics, as the
    plain layer does. Needs Keras on the TensorFlow backend (or Keras 2 through
    TF_USE_LEGACY_KERAS=1, whose tf.keras layer it then extends).

    Takes Horovod's arguments: fused=True (or None) is refused as Horovod refuses
    it; Keras 2's renorm, renorm_clipping, renorm_momentum, virtual_batch_size and
    adjustment are accepted on Keras 3 when they leave those features off.
    """

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError(
                "SyncBatchNormalization does not support fused=True: the fused kernel computes "
                "the moments itself, so they could not be reduced across ranks"
            )
        if LEGACY:
            super().__init__(fused=False, **kwargs)
        else:
            super().__init__(**_without_keras2_options(kwargs))

    def _moments(self, inputs, *args, **kwargs):
        if LEGACY:  # Keras 2: _moments(inputs, reduction_axes, keep_dims, mask=None)
            return _global_moments(inputs, *_keras2_moments_arguments(*args, **kwargs))
        mask = args[0] if args else kwargs.get("mask")
        return _global_moments(inputs, self._reduction_axes, False, mask)


def _without_keras2_options(kwargs):
    kwargs = dict(kwargs)
    for option, unused_values in _KERAS2_OPTIONS_OFF.items():
        if option in kwargs:
            value = kwargs.pop(option)
            if value not in unused_values:
                raise ValueError(
                    f"SyncBatchNormalization: {option}={value!r} is a Keras 2 feature that Keras 3's "
                    "BatchNormalization does not have; run the script with Keras 2 "
                    "(TF_USE_LEGACY_KERAS=1 and the tf-keras package) or leave it out"
                )
    for option in _KERAS2_OPTIONS_ANY:
        kwargs.pop(option, None)
    return kwargs


def _keras2_moments_arguments(reduction_axes, keep_dims=False, mask=None):
    return reduction_axes, keep_dims, mask


def _global_moments(inputs, axes, keep_dims, mask):
    compute_dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype
    values = tf.cast(inputs, compute_dtype)
    weights = tf.ones_like(values) if mask is None else _broadcast_mask(mask, values)
    total, squares, count = grouped_allreduce(
        [
            tf.reduce_sum(values * weights, axes, keepdims=keep_dims),
            tf.reduce_sum(tf.square(values) * weights, axes, keepdims=keep_dims),
            tf.reduce_sum(weights, axes, keepdims=keep_dims),
        ],
        op=Sum,
    )
    count = tf.maximum(count, 1.0)
    mean = total / count
    variance = tf.maximum(squares / count - tf.square(mean), 0.0)
    return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)


def _broadcast_mask(mask, values):
    mask = tf.cast(tf.expand_dims(mask, -1), values.dtype)
    return tf.broadcast_to(mask, tf.shape(values))
