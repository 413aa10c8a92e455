"""hvd.DistributedOptimizer for TensorFlow: gradients averaged over ranks before
every update.

A tf.compat.v1.train.Optimizer (TF1 graphs, MonitoredTrainingSession) is wrapped
so that compute_gradients returns reduced gradients, as in Horovod; a Keras
optimizer gets lockstep.keras.DistributedOptimizer.
"""

import tensorflow as tf

from lockstep.common.ops import Average
from lockstep.tensorflow.compression import Compression
from lockstep.tensorflow.gradient_reduction import GradientReducer, variable_key


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):
    def __init__(self, optimizer, name, use_locking, reducer):
        self._optimizer = optimizer
        self._reducer = reducer
        self._local_vars = set()
        super().__init__(name=name or f"Distributed{type(optimizer).__name__}", use_locking=use_locking)

    def register_local_var(self, var):
        """Keep the gradient of `var` local to this rank: not reduced, divided by the
        process set's size unless scale_local_gradients=False (Horovod's API)."""
        self._local_vars.add(variable_key(var))

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's (gradient, variable) pairs, gradients reduced in one
        grouped allreduce (but those of variables given to register_local_var)."""
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        if not pairs:
            return pairs
        gradients, variables = zip(*pairs)
        keep_local = [variable_key(variable) in self._local_vars for variable in variables]
        return list(zip(self._reducer.reduce(list(gradients), keep_local), variables))

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(
    optimizer,
    name=None,
    use_locking=False,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    backward_passes_per_step=1,
    op=Average,
    gradient_predivide_factor=1.0,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=None,
    scale_local_gradients=True,
):
    """Wrap `optimizer` so its updates use gradients reduced over all ranks.

    tf.compat.v1.train.Optimizer: minimize()/compute_gradients() reduce the
    gradients (tf.IndexedSlices gathered, or densified with sparse_as_dense).
    Keras optimizers: lockstep.keras.DistributedOptimizer with the same settings.
    device_*, num_groups and groups are accepted for ported scripts (lockstep
    reduces on the host, in one group).
    """
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        if backward_passes_per_step != 1:
            raise NotImplementedError(
                "backward_passes_per_step > 1 is not supported for tf.compat.v1 optimizers "
                "by lockstep.tensorflow yet; Keras optimizers support it"
            )
        reducer = GradientReducer(
            compression, sparse_as_dense, op, gradient_predivide_factor, process_set, scale_local_gradients
        )
        return _DistributedOptimizer(optimizer, name, use_locking, reducer)
    from lockstep.keras import keras_line  # noqa: PLC0415 (plain TF1 scripts need not load Keras)

    if keras_line.is_optimizer(optimizer):
        from lockstep.keras.optimizer import DistributedOptimizer as KerasDistributedOptimizer  # noqa: PLC0415

        return KerasDistributedOptimizer(
            optimizer,
            name=name,
            compression=compression,
            sparse_as_dense=sparse_as_dense,
            op=op,
            gradient_predivide_factor=gradient_predivide_factor,
            backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients,
            process_set=process_set,
            scale_local_gradients=scale_local_gradients,
        )
    raise TypeError(
        f"optimizer must be a tf.compat.v1.train.Optimizer or a Keras optimizer, got {type(optimizer).__name__}"
    )
