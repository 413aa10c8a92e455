"""lockstep for JAX: Horovod's API on jax.Arrays, eagerly and inside jax.jit.

import lockstep.jax as hvd
hvd.init()
grads = hvd.grouped_allreduce(grads)        # works inside jax.jit too
tx = hvd.DistributedOptimizer(optax.adam(1e-3))
"""

import jax  # noqa: F401 - before lockstep's core, as lockstep.torch explains

from lockstep.common.api import *  # noqa: F401,F403 (the shared public names)
from lockstep.jax.compression import BF16Compressor, Compression, FP16Compressor, NoneCompressor
from lockstep.jax.mpi_ops import (
    allgather,
    allgather_object,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    broadcast_object,
    grouped_allreduce,
    join,
    reducescatter,
)
from lockstep.jax.optimizer import DistributedOptimizer, broadcast_optimizer_state, broadcast_parameters
