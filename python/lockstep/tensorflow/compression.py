"""Gradient compression for allreduce, with Horovod's Compressor interface:
compress(tensor) -> (tensor, context); decompress(tensor, context) -> tensor.

tf.cast is differentiable and works eagerly and in graphs alike.
"""

import tensorflow as tf


class NoneCompressor:
    """Sends tensors unchanged."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor


class _CastCompressor:
    """Sends floating-point tensors as `wire_dtype`; other tensors pass unchanged."""

    wire_dtype = None

    @classmethod
    def compress(cls, tensor):
        if not tensor.dtype.is_floating or tensor.dtype == cls.wire_dtype:
            return tensor, None
        return tf.cast(tensor, cls.wire_dtype), tensor.dtype

    @staticmethod
    def decompress(tensor, context):
        return tensor if context is None else tf.cast(tensor, context)


class FP16Compressor(_CastCompressor):
    """Halves the bytes of float32 gradients; float16's narrow range can overflow
    very large gradients or flush tiny ones to zero."""

    wire_dtype = tf.float16


class BF16Compressor(_CastCompressor):
    """Halves the bytes of float32 gradients, keeping float32's range with fewer
    mantissa bits."""

    wire_dtype = tf.bfloat16


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
