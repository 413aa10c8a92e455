"""Gradient compression for allreduce, with Horovod's Compressor interface:
compress(tensor) -> (tensor, context); decompress(tensor, context) -> tensor.

Casting is differentiable, so compressed allreduces still work under autograd.
"""

import torch


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
        if not tensor.dtype.is_floating_point:
            return tensor, None
        # .to() returns `tensor` itself when it already has the wire dtype: no copy.
        return tensor.to(cls.wire_dtype), tensor.dtype

    @staticmethod
    def decompress(tensor, context):
        return tensor if context is None else tensor.to(context)


class FP16Compressor(_CastCompressor):
    """Halves the bytes of float32 gradients; float16's range is narrow, so very
    large or very small gradients lose precision or overflow."""

    wire_dtype = torch.float16


class BF16Compressor(_CastCompressor):
    """Halves the bytes of float32 gradients keeping float32's range (fewer mantissa bits)."""

    wire_dtype = torch.bfloat16


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
