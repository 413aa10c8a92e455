"""lockstep for TensorFlow 2: Horovod's API on tf.Tensor and tf.Variable.

    import lockstep.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)

Every collective is a native asynchronous TensorFlow op (lockstep's op library),
so it works eagerly, inside tf.function and in tf.compat.v1 Sessions, any number
of independent collectives run and fuse together, and graphs holding them save
and load (in a process that imported lockstep.tensorflow). Not with
jit_compile=True: XLA cannot compile them. Pickled-object collectives run on
the host (lockstep.common.host_ops).
"""

import tensorflow  # noqa: F401 - before lockstep's core, as lockstep.torch explains

from lockstep.common.api import *  # noqa: F401,F403 (the shared public names)
from lockstep.common.host_ops import allgather_object, broadcast_object
from lockstep.tensorflow import elastic  # noqa: F401 (hvd.elastic, as in Horovod)
from lockstep.tensorflow import gradients as _gradients  # noqa: F401 (registers the ops' gradients)
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape
from lockstep.tensorflow.mpi_ops import (
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    broadcast_,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    join,
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    reducescatter,
    size_op,
)
from lockstep.tensorflow.optimizer import DistributedOptimizer
from lockstep.tensorflow.session_hooks import BroadcastGlobalVariablesHook
from lockstep.tensorflow.variables import broadcast_global_variables, broadcast_variables


def __getattr__(name):
    # Loaded on first use: it imports Keras, which plain TensorFlow scripts need not load.
    if name == "SyncBatchNormalization":
        from lockstep.tensorflow.sync_batch_norm import SyncBatchNormalization

        return SyncBatchNormalization
    raise AttributeError(f"module 'lockstep.tensorflow' has no attribute {name!r}")
