"""SyncBatchNormalization: batch normalization whose batch statistics cover the
global batch (every rank's samples), for small per-rank batches."""

import keras
import tensorflow as tf

from lockstep.tensorflow.mpi_ops import grouped_allreduce
from lockstep.common.ops import Sum


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """keras.layers.BatchNormalization with moments reduced across ranks.

    In training, each rank sums its samples, their squares and their count; one
    grouped Sum-allreduce combines them, and every rank normalizes with the global
    mean and variance (so all ranks' moving statistics stay identical). Gradients
    flow back through the allreduce. Inference uses the moving statistics, as the
    plain layer does. Needs Keras on the TensorFlow backend.
    """

    def _moments(self, inputs, mask):
        compute_dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype
        values = tf.cast(inputs, compute_dtype)
        weights = tf.ones_like(values) if mask is None else _broadcast_mask(mask, values)
        axes = self._reduction_axes
        total, squares, count = grouped_allreduce(
            [tf.reduce_sum(values * weights, axes), tf.reduce_sum(tf.square(values) * weights, axes),
             tf.reduce_sum(weights, axes)],
            op=Sum,
        )
        count = tf.maximum(count, 1.0)
        mean = total / count
        variance = tf.maximum(squares / count - tf.square(mean), 0.0)
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)


def _broadcast_mask(mask, values):
    mask = tf.cast(tf.expand_dims(mask, -1), values.dtype)
    return tf.broadcast_to(mask, tf.shape(values))
