"""Gradient compression for numpy arrays (Compression.none, .fp16, .bf16)."""

import ml_dtypes
import numpy as np

from lockstep.common.compression import make_compression

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FLOATING = (np.dtype(np.float16), _BFLOAT16, np.dtype(np.float32), np.dtype(np.float64))

Compression = make_compression(
    is_floating=lambda array: array.dtype in _FLOATING,
    cast=lambda array, dtype: array.astype(dtype),
    float16=np.dtype(np.float16),
    bfloat16=_BFLOAT16,
)
FP16Compressor = Compression.fp16
BF16Compressor = Compression.bf16
NoneCompressor = Compression.none
