"""Gradient compression for torch tensors (Compression.none, .fp16, .bf16).
Casting with .to() is differentiable, so compressed allreduces work under autograd."""

import torch

from lockstep.common.compression import make_compression

Compression = make_compression(
    is_floating=lambda tensor: tensor.dtype.is_floating_point,
    cast=lambda tensor, dtype: tensor.to(dtype),
    float16=torch.float16,
    bfloat16=torch.bfloat16,
)
FP16Compressor = Compression.fp16
BF16Compressor = Compression.bf16
NoneCompressor = Compression.none
