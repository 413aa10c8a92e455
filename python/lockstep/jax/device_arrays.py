"""Eager collectives on jax.Arrays that live on a GPU.

They take the same XLA FFI custom call as traced values (jax dispatches the call
eagerly): the CUDA handler orders the collective on XLA's stream, so there is no
host round trip and no device synchronization. A copy to numpy and back would work
too, but stalls the device and moves every byte twice.

Inside jit the shapes of allgather and alltoall results must be given (sizes=,
received_splits=); eagerly they are asked of the other ranks first with a small
host collective, so eager calls keep Horovod's semantics (uneven first dimensions).
Where the CUDA handler is not registered (lockstep built without its GPU backend),
eager GPU arrays keep the host path.
"""

import jax
import numpy as np

from lockstep.common import host_ops as _host
from lockstep.jax import ffi_library


def on_gpu(*values):
    """Whether any of `values` is a concrete jax.Array on one GPU, and the CUDA handler
    is registered (a build without the GPU backend keeps the host path)."""
    for value in values:
        if isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer):
            devices = value.devices()
            if len(devices) == 1 and next(iter(devices)).platform == "gpu":
                return ffi_library.cuda_registered()
    return False


def first_dims(tensor, process_set):
    """Every rank's first dimension (for an eager allgather's sizes=)."""
    rows = _host.allgather(np.array([tensor.shape[0]], np.int64), process_set=process_set)
    return [int(r) for r in rows]


def received_splits(splits, process_set):
    """Rows this rank receives from each rank (for an eager alltoall's received_splits=):
    rank i's splits[me], which an alltoall of the splits themselves delivers."""
    return [int(r) for r in _host.alltoall(np.asarray(splits, np.int64).reshape(-1), process_set=process_set)]
