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
    scale_local_gradients: bool = True

    def make_reducer(self):
        return make_gradient_reducer(
            self.compression,
            self.sparse_as_dense,
            self.op,
            self.gradient_predivide_factor,
            self.process_set,
            self.scale_local_gradients,
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
    own k batches, since the sums restart from zeros (Keras 2: the sums and their
    counter are `optimizer._agg_helper`, as in Horovod). process_set: average over
    its ranks only. `optimizer.register_local_var(var)` keeps var's gradient local
    (not reduced; divided by the set's size with scale_local_gradients, the
    default). device_dense/device_sparse and num_groups/groups are accepted for
    ported scripts: lockstep reduces on the host, in one group.
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
        bool(scale_local_gradients),
    )
    reducer = settings.make_reducer()  # checks op, compression and the set now, not at the first step
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    if passes > 1 and not keras_line.LEGACY:
        config = keras3_accumulation_config(config, passes)
    wrapped = distributed_class(type(optimizer), settings).from_config(config)
    wrapped.lockstep_gradient_reducer = reducer
    if keras_line.LEGACY:
        wrapped._agg_helper = wrapped._lockstep_aggregation()  # Horovod's attribute: None without aggregation
    return wrapped


def PartialDistributedOptimizer(
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
    groups=None,
    process_set=None,
    local_layers=None,
    scale_local_gradients=True,
):
    """A DistributedOptimizer that keeps the gradients of `local_layers`' trainable
    weights (a Keras layer or a list of them) local to each rank, as Horovod's: they
    are not reduced, and are divided by the process set's size with
    scale_local_gradients (the default)."""
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not isinstance(layer, keras_line.keras.layers.Layer):
            raise ValueError(f"local_layers must hold Keras layers, got {type(layer).__name__}")
    wrapped = DistributedOptimizer(
        optimizer,
        name,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        gradient_predivide_factor,
        op,
        backward_passes_per_step,
        average_aggregated_gradients,
        groups=groups,
        process_set=process_set,
        scale_local_gradients=scale_local_gradients,
    )
    for layer in local_layers:
        for weight in layer.trainable_weights:
            wrapped.register_local_var(weight)
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

    def register_local_var(self, var):
        """Keep the gradient of `var` local to this rank (Horovod's API): it is not
        reduced, and is divided by the process set's size with scale_local_gradients."""
        local = self.__dict__.setdefault("_lockstep_local_vars", {})
        local[id(var)] = var  # holding the variable keeps its id from being reused

    def _lockstep_keep_local(self, variables):
        local = self.__dict__.get("_lockstep_local_vars")
        if not local:
            return None
        return [id(variable) in local for variable in variables]


class _Keras3Distributed(_ReducerOwner):
    def apply(self, grads, trainable_variables=None):
        variables = self._trainable_variables if trainable_variables is None else trainable_variables
        keep_local = self._lockstep_keep_local(list(variables))
        if self._lockstep_settings.backward_passes_per_step > 1:
            # Keras' own accumulation runs; _clip_gradients reduces on update steps.
            self.__dict__["_lockstep_pending_keep_local"] = keep_local
            return super().apply(grads, trainable_variables)
        reduced = self._lockstep_reducer().reduce(list(grads), keep_local)
        return super().apply(reduced, trainable_variables)

    def _clip_gradients(self, grads):
        settings = self._lockstep_settings
        if settings.backward_passes_per_step > 1:
            keep_local = self.__dict__.get("_lockstep_pending_keep_local")
            grads = reduce_accumulated(self, self._lockstep_reducer(), list(grads), settings, keep_local)
        return super()._clip_gradients(grads)


class _Keras2Distributed(_ReducerOwner):
    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """Horovod's override (what minimize() and Keras 2's fit() call): the
        (gradient, variable) pairs with the gradients already reduced, which the
        apply_gradients() that follows then applies as they are. With
        backward_passes_per_step > 1 the gradients come back local, and
        apply_gradients() aggregates and reduces them."""
        import tensorflow as tf

        if keras_line.is_legacy_optimizer(self):
            pairs = super()._compute_gradients(loss, var_list, grad_loss=grad_loss, tape=tape)
        else:
            tape = tf.GradientTape() if tape is None else tape
            if callable(loss):
                with tape:
                    tape.watch(var_list)
                    loss = loss()
            pairs = list(zip(tape.gradient(loss, var_list, output_gradients=grad_loss), var_list))
        if self._lockstep_settings.backward_passes_per_step > 1:
            return pairs
        grads = [grad for grad, _ in pairs]
        variables = [variable for _, variable in pairs]
        reduced = self._lockstep_reducer().reduce(grads, self._lockstep_keep_local(variables))
        self.__dict__["_lockstep_reduced_pending"] = True  # the next apply_gradients applies them as they are
        return list(zip(reduced, variables))

    def _lockstep_aggregation(self):
        """The gradient sums and their counter (Horovod's `_agg_helper`), or None."""
        settings = self._lockstep_settings
        if settings.backward_passes_per_step == 1:
            return None
        aggregation = self.__dict__.get("_agg_helper")
        if aggregation is None:
            aggregation = Keras2Aggregation(settings.backward_passes_per_step, settings.average_aggregated_gradients)
            self._agg_helper = aggregation
        return aggregation

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = list(grads_and_vars)
        grads = [grad for grad, _ in pairs]
        variables = [variable for _, variable in pairs]
        keep_local = self._lockstep_keep_local(variables)
        aggregation = self._lockstep_aggregation()
        if aggregation is None:
            if not self.__dict__.pop("_lockstep_reduced_pending", False):
                grads = self._lockstep_reducer().reduce(grads, keep_local)
            return super().apply_gradients(list(zip(grads, variables)), *args, **kwargs)
        apply = super().apply_gradients
        return aggregation.apply(
            self,
            grads,
            variables,
            self._lockstep_reducer(),
            lambda reduced: apply(list(zip(reduced, variables)), *args, **kwargs),
            keep_local,
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
