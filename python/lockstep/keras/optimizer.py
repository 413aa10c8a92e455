"""DistributedOptimizer for Keras 3: any Keras optimizer, averaging gradients over
ranks before every update.

The wrapper is a subclass of the optimizer's own class that overrides `apply`,
the one method every Keras 3 update goes through (`apply_gradients` calls it,
and both the TensorFlow and torch trainers of `model.fit` end up there). The
subclass carries the original class's name and module, so a saved model records
a plain optimizer and loads anywhere; lockstep.keras.load_model rewraps it.
"""

from lockstep.common.ops import Average
from lockstep.keras.compression import Compression
from lockstep.keras.gradient_reduction import make_gradient_reducer

# One distributed subclass per optimizer class, so wrapping twice gives one type.
_DISTRIBUTED_CLASSES = {}


def DistributedOptimizer(optimizer, name=None, compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, device_dense="", device_sparse="",
                         process_set=None):
    """A new optimizer like `optimizer` (same class and config) whose updates use
    gradients averaged (op=Average) or summed (op=Sum) over all ranks.

        model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3)), ...)

    compression: Compression.none/fp16/bf16 for the allreduce. sparse_as_dense:
    densify tf.IndexedSlices gradients (TensorFlow backend) instead of gathering
    them. gradient_predivide_factor: divide by this before the sum and by
    size/factor after it. device_dense/device_sparse are accepted for ported
    scripts; lockstep reduces on the host. process_set: average over its ranks only.
    """
    _check_optimizer(optimizer)
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    wrapped = distributed_class(type(optimizer)).from_config(config)
    wrapped.lockstep_gradient_reducer = make_gradient_reducer(
        compression, sparse_as_dense, op, gradient_predivide_factor, process_set)
    return wrapped


def rewrap_in_place(optimizer, compression=Compression.none, sparse_as_dense=False,
                    gradient_predivide_factor=1.0, op=Average):
    """Turn an existing optimizer (e.g. one just loaded with its state) into a
    distributed one without recreating it, so its variables and step count stay."""
    reducer = make_gradient_reducer(compression, sparse_as_dense, op, gradient_predivide_factor)
    if not is_distributed(optimizer):
        _check_optimizer(optimizer)
        optimizer.__class__ = distributed_class(type(optimizer))
    optimizer.lockstep_gradient_reducer = reducer
    return optimizer


def is_distributed(optimizer):
    return getattr(type(optimizer), "_lockstep_distributed", False)


def distributed_class(base):
    cls = _DISTRIBUTED_CLASSES.get(base)
    if cls is None:
        cls = _make_distributed_class(base)
        _DISTRIBUTED_CLASSES[base] = cls
    return cls


def _make_distributed_class(base):
    class Distributed(base):
        _lockstep_distributed = True

        def apply(self, grads, trainable_variables=None):
            reduced = self.lockstep_gradient_reducer.reduce(list(grads))
            return super().apply(reduced, trainable_variables)

    # Serialized configs name the class; keep the original's so files stay portable.
    Distributed.__name__ = base.__name__
    Distributed.__qualname__ = base.__qualname__
    Distributed.__module__ = base.__module__
    Distributed.__doc__ = f"{base.__name__} with gradients averaged over lockstep ranks."
    return Distributed


def _check_optimizer(optimizer):
    import keras

    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"optimizer must be a keras.optimizers.Optimizer, got {type(optimizer).__name__}")
    if is_distributed(optimizer):
        raise ValueError("this optimizer is already a lockstep DistributedOptimizer; wrap the original once")
