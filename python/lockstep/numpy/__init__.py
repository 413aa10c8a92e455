"""lockstep for numpy arrays: Horovod's API with numpy arrays as tensors.

    import lockstep.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum)
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
from lockstep.numpy.compression import Compression
from lockstep.numpy.mpi_ops import (
    allgather,
    allgather_async,
    allgather_object,
    allreduce,
    allreduce_async,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_async,
    broadcast_object,
    grouped_allreduce,
    grouped_allreduce_async,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    synchronize,
)
