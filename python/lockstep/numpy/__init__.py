"""lockstep for numpy arrays: Horovod's API with numpy arrays as tensors.

import lockstep.numpy as hvd
hvd.init()
total = hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum)
"""

from lockstep.common.api import *  # noqa: F401,F403 (the shared public names)
from lockstep.common.host_compression import Compression
from lockstep.common.host_ops import (
    allgather,
    allgather_async,
    allgather_object,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_async,
    broadcast_object,
    grouped_allgather,
    grouped_allgather_async,
    grouped_allreduce,
    grouped_allreduce_async,
    grouped_reducescatter,
    grouped_reducescatter_async,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    synchronize,
)
