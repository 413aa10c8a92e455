"""lockstep: Horovod-style synchronous data-parallel training on MPI.

Frontends live in submodules (lockstep.numpy, lockstep.torch); this package holds
what they share: life cycle, topology, reduce-op constants and exceptions.
"""

from lockstep.common.basics import (
    cross_rank,
    cross_size,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from lockstep.common.exceptions import HorovodInternalError, LockstepError, NotInitializedError
from lockstep.common.ops import Adasum, Average, Max, Min, Product, Sum

__version__ = "0.1.0"
