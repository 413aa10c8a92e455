"""Gradient compression for jax.Arrays (Compression.none, .fp16, .bf16): floating
tensors travel in the narrower type and come back in their own. The casts are
ordinary JAX ops, so they work inside jax.jit and under jax.grad."""

import jax.numpy as jnp

from lockstep.common.compression import make_compression

Compression = make_compression(
    is_floating=lambda x: jnp.issubdtype(x.dtype, jnp.floating),
    cast=lambda x, dtype: x.astype(dtype),
    float16=jnp.dtype(jnp.float16),
    bfloat16=jnp.dtype(jnp.bfloat16),
)
FP16Compressor = Compression.fp16
BF16Compressor = Compression.bf16
NoneCompressor = Compression.none
