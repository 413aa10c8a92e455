"""Gradient compression for allreduce, with Horovod's Compressor interface:
compress(array) -> (array, context); decompress(array, context) -> array."""

import numpy as np


class NoneCompressor:
    @staticmethod
    def compress(array):
        return array, None

    @staticmethod
    def decompress(array, context):
        return array


class FP16Compressor:
    """Sends float32/float64 arrays as float16, halving or quartering the bytes."""

    @staticmethod
    def compress(array):
        if array.dtype in (np.float32, np.float64):
            return array.astype(np.float16), array.dtype
        return array, None

    @staticmethod
    def decompress(array, context):
        return array if context is None else array.astype(context)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
