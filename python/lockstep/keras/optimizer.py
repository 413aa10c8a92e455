"""DistributedOptimizer for Keras: any Keras optimizer, averaging gradients over
ranks before every update.

As in Horovod, each wrap makes a subclass of the optimizer's own class that
holds the wrap's settings; its from_config therefore builds another optimizer
reducing the same way, so get_config/from_config round-trip a wrapped optimizer.
The subclass carries the original class's name and module, so a saved model
records a plain optimizer and loads anywhere; lockstep.keras.load_model rewraps it.

Keras 3 updates go through `apply` (apply_gradients and every backend's
model.fit end there); Keras 2 ones (tf-keras, current and legacy optimizers)
through `apply_gradients`. The gradient aggregation of backward_passes_per_step
is in lockstep.keras.aggregation.
"""

from dataclasses import dataclass
from typing import Any

from lockstep.common.ops import Average
from lockstep.common.validation import as_int
from lockstep.keras import keras_line
from lockstep.keras.aggregation import Keras2Aggregation, keras3_accumulation_config, reduce_accumulated
from lockstep.keras.compression import Compression
from lockstep.keras.gradient_reduction import make_gradient_reducer


@dataclass(frozen=True)
class Settings:
    compression: Any = Compression.none
    sparse_as_dense: bool = False
    op: Any = Average
    gradient_predivide_factor: float = 1.0
    process_set: Any = None
    backward_passes_per_step: int = 1
    average_aggregated_gradients: bool = False

    def make_reducer(self):
        return make_gradient_reducer(
            self.compression, self.sparse_as_dense, self.op, self.gradient_predivide_factor, self.process_set
        )


def DistributedOptimizer(
    optimizer,
    name=None,
    device_dense="",
    device_sparse="",
    compression=Compression.none,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    backward_passes_per_step=1,
    average_aggregated_gradients=False,
    num_groups=0,
    groups=None,
    process_set=None,
    scale_local_gradients=True,
):
    """A new optimizer like `optimizer` (same class and config) whose updates use
    gradients averaged (op=Average) or summed (op=Sum) over all ranks. Horovod's
    arguments, in Horovod's order.

        model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3)), ...)

    compression: Compression.none/fp16/bf16 for the allreduce. sparse_as_dense:
    densify tf.IndexedSlices gradients (TensorFlow backend) instead of gathering
    them. gradient_predivide_factor: divide by this before the sum and by
    size/factor after it. backward_passes_per_step=k: add up the gradients of k
    batches locally and communicate and update on every k-th only (divided by k
    with average_aggregated_gradients=True); a non-finite gradient spoils only its
    own k batches, since the sums restart from zeros. process_set: average over
    its ranks only. device_dense/device_sparse, num_groups/groups and
    scale_local_gradients are accepted for ported scripts: lockstep reduces on the
    host, in one group, and keeps no local gradients here.
    """
    _check_optimizer(optimizer)
    passes = as_int(backward_passes_per_step, "backward_passes_per_step")
    if passes < 1:
        raise ValueError(f"backward_passes_per_step must be > 0, got {passes}")
    settings = Settings(
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        process_set,
        passes,
        bool(average_aggregated_gradients),
    )
    reducer = settings.make_reducer()  # checks op, compression and the set now, not at the first step
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    if passes > 1 and not keras_line.LEGACY:
        config = keras3_accumulation_config(config, passes)
    wrapped = distributed_class(type(optimizer), settings).from_config(config)
    wrapped.lockstep_gradient_reducer = reducer
    return wrapped


def rewrap_in_place(
    optimizer, compression=Compression.none, sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average
):
    """Turn an existing optimizer (e.g. one just loaded with its state) into a
    distributed one without recreating it, so its variables and step count stay."""
    settings = Settings(compression, sparse_as_dense, op, gradient_predivide_factor)
    reducer = settings.make_reducer()
    base = type(optimizer)
    if is_distributed(optimizer):
        base = base._lockstep_base
    else:
        _check_optimizer(optimizer)
    optimizer.__class__ = distributed_class(base, settings)
    optimizer.lockstep_gradient_reducer = reducer
    return optimizer


def is_distributed(optimizer):
    return getattr(type(optimizer), "_lockstep_settings", None) is not None


def distributed_class(base, settings):
    """A subclass of `base` reducing gradients with `settings`, named like `base`."""
    mixin = _Keras2Distributed if keras_line.LEGACY else _Keras3Distributed
    cls = type(
        base.__name__,
        (mixin, base),
        {
            "_lockstep_settings": settings,
            "_lockstep_base": base,
            "__module__": base.__module__,  # serialized configs name the class: keep the original's
            "__qualname__": base.__qualname__,
            "__doc__": f"{base.__name__} with gradients averaged over lockstep ranks.",
        },
    )
    return cls


class _ReducerOwner:
    def _lockstep_reducer(self):
        # Made by DistributedOptimizer; made here for instances from_config built.
        reducer = getattr(self, "lockstep_gradient_reducer", None)
        if reducer is None:
            reducer = self._lockstep_settings.make_reducer()
            self.lockstep_gradient_reducer = reducer
        return reducer


class _Keras3Distributed(_ReducerOwner):
    def apply(self, grads, trainable_variables=None):
        if self._lockstep_settings.backward_passes_per_step > 1:
            # Keras' own accumulation runs; _clip_gradients reduces on update steps.
            return super().apply(grads, trainable_variables)
        reduced = self._lockstep_reducer().reduce(list(grads))
        return super().apply(reduced, trainable_variables)

    def _clip_gradients(self, grads):
        settings = self._lockstep_settings
        if settings.backward_passes_per_step > 1:
            grads = reduce_accumulated(self, self._lockstep_reducer(), list(grads), settings)
        return super()._clip_gradients(grads)


class _Keras2Distributed(_ReducerOwner):
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = list(grads_and_vars)
        grads = [grad for grad, _ in pairs]
        variables = [variable for _, variable in pairs]
        settings = self._lockstep_settings
        if settings.backward_passes_per_step == 1:
            reduced = self._lockstep_reducer().reduce(grads)
            return super().apply_gradients(list(zip(reduced, variables)), *args, **kwargs)
        aggregation = getattr(self, "_lockstep_aggregation", None)
        if aggregation is None:
            aggregation = Keras2Aggregation(settings.backward_passes_per_step, settings.average_aggregated_gradients)
            self._lockstep_aggregation = aggregation
        apply = super().apply_gradients
        return aggregation.apply(
            self,
            grads,
            variables,
            self._lockstep_reducer(),
            lambda reduced: apply(list(zip(reduced, variables)), *args, **kwargs),
        )


def _check_optimizer(optimizer):
    if not keras_line.is_optimizer(optimizer):
        what = "a keras.optimizers.Optimizer"
        if keras_line.LEGACY:
            what = "a tf.keras optimizer (tf.keras.optimizers.Optimizer or tf.keras.optimizers.legacy.Optimizer)"
        elif type(optimizer).__module__.startswith("tf_keras"):
            what += (
                " (this is a Keras 2 optimizer from tf-keras: set TF_USE_LEGACY_KERAS=1 before importing "
                "TensorFlow to use Keras 2 with lockstep.keras)"
            )
        raise TypeError(f"optimizer must be {what}, got {type(optimizer).__name__}")
    if is_distributed(optimizer):
        raise ValueError("this optimizer is already a lockstep DistributedOptimizer; wrap the original once")
