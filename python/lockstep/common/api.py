"""The public names every frontend module shares: life cycle, topology, reduce-op
constants and exceptions. Frontends re-export this list with a star import so that
`hvd.rank()` or `hvd.Sum` work the same whichever frontend `hvd` is."""

from lockstep.common.basics import (
    ccl_built,
    cross_rank,
    cuda_built,
    ddl_built,
    engine_stats,
    gloo_built,
    gloo_enabled,
    cross_size,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    nccl_info,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from lockstep.common.exceptions import (
    AbortedError,
    HorovodInternalError,
    InvalidArgumentError,
    LockstepError,
    NotInitializedError,
    PreconditionError,
    UnsupportedOperationError,
)
from lockstep.common.ops import Adasum, Average, Max, Min, Product, Sum
from lockstep.common.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set

__all__ = [
    "ccl_built", "cuda_built", "ddl_built", "gloo_built", "gloo_enabled", "rocm_built",
    "cross_rank", "cross_size", "init", "is_initialized", "local_rank", "local_size",
    "engine_stats", "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "nccl_info", "rank", "shutdown",
    "size", "start_timeline", "stop_timeline",
    "AbortedError", "HorovodInternalError", "InvalidArgumentError", "LockstepError", "NotInitializedError",
    "PreconditionError", "UnsupportedOperationError",
    "Adasum", "Average", "Max", "Min", "Product", "Sum",
    "ProcessSet", "add_process_set", "global_process_set", "remove_process_set",
]
