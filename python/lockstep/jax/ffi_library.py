"""Loads lockstep/_jax_ops.so (the XLA FFI handlers, built against the installed
JAX's FFI headers) and registers them as the FFI target "lockstep_collective", once
per process: the CPU handler always, the CUDA handler (lockstep's GPU path, with
XLA's stream as the ready point) where the library has one (a build with the NCCL
backend) and JAX has a CUDA backend."""

import ctypes
import functools
from pathlib import Path

import jax

TARGET = "lockstep_collective"
_LIBRARY = Path(__file__).resolve().parent.parent / "_jax_ops.so"
_CUDA_HANDLER = "LockstepCollectiveCuda"


def ensure_registered():
    """Register the handlers (idempotent); a clear error when the library is missing."""
    _register()
    return TARGET


def cuda_registered():
    """Whether the CUDA handler is registered (registering the handlers first): where it
    is not, eager GPU arrays keep the host path instead of a custom call XLA lacks."""
    try:
        return _register()
    except RuntimeError:
        return False


@functools.lru_cache(maxsize=None)
def _register():
    """Registers the handlers once; returns whether the CUDA one was registered."""
    if not _LIBRARY.exists():
        raise RuntimeError(
            f"lockstep's JAX FFI library {_LIBRARY} is not built: rebuild lockstep with JAX importable "
            "by the build's Python (cmake -DLOCKSTEP_WITH_JAX=ON), then collectives work inside jax.jit"
        )
    library = ctypes.cdll.LoadLibrary(str(_LIBRARY))
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(library.LockstepCollective), platform="cpu")
    if not (has_cuda_handler(library) and jax_has_cuda()):
        return False
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(getattr(library, _CUDA_HANDLER)), platform="CUDA")
    return True


def has_cuda_handler(library=None):
    """Whether _jax_ops.so has the CUDA handler (lockstep was built with its GPU backend)."""
    if library is None:
        if not _LIBRARY.exists():
            return False
        library = ctypes.cdll.LoadLibrary(str(_LIBRARY))
    return hasattr(library, _CUDA_HANDLER)


def jax_has_cuda():
    """Whether this JAX has a CUDA backend with at least one device."""
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False
