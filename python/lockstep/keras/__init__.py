"""lockstep for Keras 3 (TensorFlow, torch and JAX backends), or for Keras 2 from
tf-keras when TF_USE_LEGACY_KERAS=1 makes it tf.keras: Horovod's Keras API. Also
importable as lockstep.tensorflow.keras (Horovod's horovod.tensorflow.keras).

    import keras
    import lockstep.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3 * hvd.size())),
                  loss=...)
    model.fit(x, y, callbacks=[hvd.BroadcastGlobalVariablesCallback(0), hvd.MetricAverageCallback()],
              verbose=1 if hvd.rank() == 0 else 0)

Save checkpoints and logs on rank 0 only (e.g. add ModelCheckpoint there), and
resume with load_model plus BroadcastGlobalVariablesCallback.
"""

import keras  # noqa: F401 - before lockstep's core, as lockstep.torch explains

from lockstep.common.api import *  # noqa: F401,F403 (the shared public names)
from lockstep.common.host_ops import allgather_object, broadcast_object
from lockstep.keras import elastic  # noqa: F401 (hvd.elastic, as in Horovod)
from lockstep.keras.backup import BroadcastInitialEpochCallback
from lockstep.keras.callbacks import BroadcastGlobalVariablesCallback, MetricAverageCallback
from lockstep.keras.collectives import allgather, allreduce, broadcast
from lockstep.keras.compression import Compression
from lockstep.keras.learning_rate import LearningRateScheduleCallback, LearningRateWarmupCallback
from lockstep.keras.optimizer import DistributedOptimizer, PartialDistributedOptimizer
from lockstep.keras.saving import load_model
from lockstep.keras.variables import broadcast_variables
