"""Gradient compression for TensorFlow tensors (Compression.none, .fp16, .bf16).
tf.cast is differentiable and works eagerly and in graphs alike."""

import tensorflow as tf

from lockstep.common.compression import make_compression

Compression = make_compression(
    is_floating=lambda tensor: tensor.dtype.is_floating,
    cast=tf.cast,
    float16=tf.float16,
    bfloat16=tf.bfloat16,
)
FP16Compressor = Compression.fp16
BF16Compressor = Compression.bf16
NoneCompressor = Compression.none
