"""Loads lockstep/_jax_ops.so (the XLA FFI handler, built against the installed
JAX's FFI headers) and registers its handler as the CPU FFI target
"lockstep_collective", once per process."""

import ctypes
import functools
from pathlib import Path

import jax

TARGET = "lockstep_collective"
_LIBRARY = Path(__file__).resolve().parent.parent / "_jax_ops.so"


@functools.lru_cache(maxsize=None)
def ensure_registered():
    """Register the handler (idempotent); a clear error when the library is missing."""
    if not _LIBRARY.exists():
        raise RuntimeError(
            f"lockstep's JAX FFI library {_LIBRARY} is not built: rebuild lockstep with JAX importable "
            "by the build's Python (cmake -DLOCKSTEP_WITH_JAX=ON), then collectives work inside jax.jit"
        )
    library = ctypes.cdll.LoadLibrary(str(_LIBRARY))
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(library.LockstepCollective), platform="cpu")
    return TARGET
