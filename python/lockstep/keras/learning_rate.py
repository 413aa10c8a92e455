"""Learning-rate schedule and warmup callbacks with Horovod's semantics.

Large-batch training (one batch per rank per step) usually scales the learning
rate by the number of ranks; warming up to that rate over the first epochs
avoids early divergence (Goyal et al., "Accurate, Large Minibatch SGD").
"""

import warnings

from lockstep.common import basics
from lockstep.keras.keras_line import backend_name, keras, to_numpy


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Set the learning rate to initial_lr * multiplier(epoch) in
    [start_epoch, end_epoch).

    multiplier: a number or a function of the epoch. staircase=True changes the
    rate at the first batch of each epoch; staircase=False every batch, with a
    fractional epoch (epoch + batch / steps_per_epoch; steps_per_epoch defaults
    to fit()'s). momentum_correction scales the optimizer's momentum by
    new_lr / old_lr for the batch where the rate changes. initial_lr=None takes
    the optimizer's rate when training starts. Epoch logs get an "lr" entry.
    """

    def __init__(
        self,
        initial_lr,
        multiplier,
        start_epoch=0,
        end_epoch=None,
        staircase=True,
        momentum_correction=True,
        steps_per_epoch=None,
    ):
        super().__init__()
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        if callable(multiplier):
            self.multiplier = multiplier
            self.staircase = staircase
        else:
            self.multiplier = lambda epoch: multiplier
            self.staircase = True  # a constant has nothing to interpolate
        self.current_epoch = 0
        self._momentum_to_restore = None
        self._warned_momentum = False

    def on_train_begin(self, logs=None):
        if self.initial_lr is None:
            self.initial_lr = _learning_rate(self.model.optimizer)
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self.params.get("steps")
            if not self.steps_per_epoch:
                raise ValueError("pass steps_per_epoch: fit() does not know how many steps an epoch has")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if not self._in_range(self.current_epoch):
            return
        if self.staircase:
            if batch == 0:
                self._set_rate_for(self.current_epoch)
        else:
            self._set_rate_for(self.current_epoch + batch / self.steps_per_epoch)

    def on_train_batch_end(self, batch, logs=None):
        if self._momentum_to_restore is not None:
            self.model.optimizer.momentum = self._momentum_to_restore
            self._momentum_to_restore = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _learning_rate(self.model.optimizer)

    def _in_range(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _set_rate_for(self, epoch):
        optimizer = self.model.optimizer
        old_rate = _learning_rate(optimizer)
        new_rate = self.initial_lr * self.multiplier(epoch)
        optimizer.learning_rate = new_rate
        if self.momentum_correction and old_rate > 0 and new_rate != old_rate:
            self._correct_momentum(optimizer, new_rate / old_rate)

    def _correct_momentum(self, optimizer, ratio):
        momentum = getattr(optimizer, "momentum", None)
        if not isinstance(momentum, (int, float)) or momentum == 0:
            return
        if not self._momentum_read_each_step():
            self._warn_momentum_fixed()
            return
        self._momentum_to_restore = momentum
        optimizer.momentum = momentum * ratio

    def _momentum_read_each_step(self):
        # Keras 3 keeps momentum as a Python float; a compiled TensorFlow step has
        # it baked in, so changing it there would silently do nothing.
        return backend_name() != "tensorflow" or self.model.run_eagerly

    def _warn_momentum_fixed(self):
        if not self._warned_momentum:
            self._warned_momentum = True
            warnings.warn(
                "momentum_correction is skipped: the compiled TensorFlow train step reads the "
                "optimizer's momentum once; pass momentum_correction=False to silence this",
                stacklevel=2,
            )


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Ramp the learning rate from initial_lr / size to initial_lr over
    warmup_epochs, changing it every batch; initial_lr is the rate already
    scaled for all ranks. verbose > 0 prints when the warmup ends.
    """

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        super().__init__(
            initial_lr,
            self._warmup_multiplier,
            start_epoch=0,
            end_epoch=warmup_epochs,
            staircase=False,
            momentum_correction=momentum_correction,
            steps_per_epoch=steps_per_epoch,
        )
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

    def _warmup_multiplier(self, epoch):
        # Shifted by one batch so the last batch of the warmup reaches the full rate.
        epoch += 1.0 / self.steps_per_epoch
        size = basics.size()
        return (epoch * (size - 1) / self.warmup_epochs + 1) / size

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if self.verbose > 0 and epoch == self.end_epoch - 1:
            rate = _learning_rate(self.model.optimizer)
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {rate:g}.")


def _learning_rate(optimizer):
    # With a LearningRateSchedule this reads fine, and setting the rate raises
    # Keras' own error saying the schedule cannot be overwritten.
    return float(to_numpy(optimizer.learning_rate))
