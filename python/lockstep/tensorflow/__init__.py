"""lockstep for TensorFlow 2: Horovod's API on tf.Tensor and tf.Variable.

    import lockstep.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)

Collectives work eagerly and inside tf.function (not with jit_compile=True: XLA
cannot compile the host calls they make). Pickled-object collectives run on the
host and are shared with lockstep.numpy.
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
from lockstep.numpy.mpi_ops import allgather_object, broadcast_object
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.gradient_tape import DistributedGradientTape
from lockstep.tensorflow.mpi_ops import (
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    grouped_allreduce,
    join,
    reducescatter,
)
from lockstep.tensorflow.session_hooks import BroadcastGlobalVariablesHook
from lockstep.tensorflow.variables import broadcast_global_variables, broadcast_variables
