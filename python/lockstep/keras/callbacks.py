"""Callbacks that keep ranks consistent during model.fit: the same starting state
and the same epoch metrics everywhere."""

import numpy as np

from lockstep import _core
from lockstep.common import host_ops
from lockstep.common.exceptions import AbortedError
from lockstep.common.ops import Average
from lockstep.keras.keras_line import backend_name, build_optimizer, keras, optimizer_variables
from lockstep.keras.variables import broadcast_variables


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """At the start of every fit(), copy root_rank's model and optimizer variables
    to all ranks, so training starts from one state even when ranks initialized
    differently or only root_rank restored a checkpoint.

    On the JAX backend it also ends fit() with lockstep's error soon after lockstep
    has stopped (a rank stopped answering, or shutdown() ran elsewhere). JAX
    dispatches steps without waiting for them, so fit() would otherwise run every
    remaining step on failed results and raise only where some value is read, with
    JAX's error repeated once per step before lockstep's. The TensorFlow and torch
    backends raise inside the failing step.
    """

    # Keras may run the batch-end hook on a worker thread and keep dispatching steps:
    # it only reads lockstep's state. A failure it raises there ends fit() at Keras'
    # next batch.
    async_safe = True

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.device = device  # accepted for ported scripts; the broadcast runs on the host
        # Horovod's: variables each rank keeps its own (e.g. a model-parallel layer's).
        self.local_variables = list(local_variables or [])

    def on_train_begin(self, logs=None):
        optimizer = self.model.optimizer
        variables = list(self.model.variables)
        if optimizer is not None:
            # Keras 3's fit() builds the optimizer before this hook; build here if a
            # custom loop (or Keras 2) did not, so its slots are broadcast too.
            build_optimizer(optimizer, self.model.trainable_variables)
            variables += optimizer_variables(optimizer)
        local = {id(variable) for variable in self.local_variables}
        variables = [variable for variable in variables if id(variable) not in local]
        broadcast_variables(variables, self.root_rank, name="BroadcastGlobalVariablesCallback")

    if backend_name() == "jax":  # elsewhere the hook would only make Keras wait for each step's logs

        def on_train_batch_end(self, batch, logs=None):
            if not _core.is_initialized():
                raise AbortedError(f"fit() cannot go on: {_core.not_running_reason()}")


class MetricAverageCallback(keras.callbacks.Callback):
    """Replace each epoch-end metric with its average over ranks.

    Put it before callbacks that read metrics (ModelCheckpoint, ReduceLROnPlateau,
    CSVLogger): Keras calls callbacks in list order and they share the logs dict.
    """

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        keys = sorted(key for key, value in logs.items() if _is_number(value))
        values = np.array([float(logs[key]) for key in keys], dtype=np.float64)
        averaged = host_ops.allreduce(values, op=Average, name=f"MetricAverageCallback.{epoch}")
        for key, value in zip(keys, averaged):
            logs[key] = float(value)


def _is_number(value):
    return np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.number)


# Horovod scripts spell these hvd.callbacks.LearningRate*Callback.
from lockstep.keras.learning_rate import (  # noqa: E402,F401
    LearningRateScheduleCallback,
    LearningRateWarmupCallback,
)
