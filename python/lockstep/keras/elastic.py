"""Elastic training for lockstep.keras (Keras 3, or Keras 2 under TF_USE_LEGACY_KERAS=1),
as Horovod's `hvd.elastic` for Keras:

    state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=100)]

    @hvd.elastic.run
    def train(state):
        state.model.fit(x, y, epochs=epochs - state.epoch, callbacks=callbacks)

Keras 3 cannot shorten an epoch that has begun (tf.keras 2 let Horovod lower
params['steps']), so a job resumed from a commit made mid-epoch trains that epoch
again in full, from the committed weights; commits at epoch ends resume exactly.
"""

import numpy as np

from lockstep.common import basics
from lockstep.common.elastic import HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State, run_fn
from lockstep.common.host_ops import allgather_object, broadcast_object
from lockstep.keras.keras_line import build_optimizer, keras, optimizer_variables, to_numpy
from lockstep.keras.variables import broadcast_variables


def run(func):
    """Decorator: `func(state, ...)` runs until done, resuming from the last commit
    after a lost peer or a change of hosts (see lockstep.common.elastic.runner)."""
    return run_fn(func, allgather_object)


class KerasState(ObjectState):
    """A built Keras model, its optimizer (default: the compiled one) and any picklable
    values as attributes. The optimizer's variables are created here if they do not
    exist yet, so that every rank has the same variables to save and sync."""

    def __init__(self, model, optimizer=None, **kwargs):
        if not model.built:
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer or getattr(model, "optimizer", None)
        if self.optimizer is not None:
            build_optimizer(self.optimizer, model.trainable_variables)
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=basics.rank, **kwargs)

    def _variables(self):
        slots = optimizer_variables(self.optimizer) if self.optimizer is not None else []
        return list(self.model.variables) + slots

    def _save_model(self):
        self._values = [np.array(to_numpy(variable)) for variable in self._variables()]

    def _load_model(self):
        for variable, value in zip(self._variables(), self._values):
            variable.assign(value)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        self._load_model()
        super().restore()

    def sync(self):
        broadcast_variables(self._variables(), root_rank=self._sync_root)
        self._save_model()
        super().sync()

    def snapshot(self):
        return {"variables": self._values, **super().snapshot()}

    def load_snapshot(self, snapshot):
        self._values = snapshot["variables"]
        self._load_model()
        super().load_snapshot(snapshot)


class CommitStateCallback(keras.callbacks.Callback):
    """Commits `state` every `batches_per_commit` batches and at each epoch's end."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps `state.batch` at the last finished batch of the epoch (0 after an epoch)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps `state.epoch` at the number of finished epochs, counting those of earlier
    fit() calls, so `fit(epochs=total - state.epoch)` resumes where training was."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = self.initial_epoch + epoch + 1


__all__ = [
    "CommitStateCallback",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "KerasState",
    "ObjectState",
    "State",
    "UpdateBatchStateCallback",
    "UpdateEpochStateCallback",
    "run",
]
