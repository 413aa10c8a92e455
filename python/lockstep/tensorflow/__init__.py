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

from lockstep.common.api import *  # noqa: F401,F403 (the shared public names)
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
