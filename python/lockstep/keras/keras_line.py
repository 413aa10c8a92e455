"""Which Keras lockstep.keras works with: Keras 3, or Keras 2 through tf-keras.

TensorFlow makes `tf.keras` the Keras 2 of the tf-keras package when
TF_USE_LEGACY_KERAS is set (the values TensorFlow itself accepts), which is how
scripts written for tf.keras 2 (most Horovod Keras scripts) keep running. Under
that switch lockstep.keras uses that Keras too, so the models, optimizers and
callbacks of one script all come from one Keras. The choice is made once, at
import, as TensorFlow makes it.

The few places where the two lines differ are answered here, so the rest of
lockstep.keras reads the same for both.
"""

import os

import numpy as np

# TensorFlow's own test of the switch (tensorflow/python/util/lazy_loader.py).
_LEGACY_VALUES = ("true", "True", "1")


def legacy_keras_requested():
    return os.environ.get("TF_USE_LEGACY_KERAS") in _LEGACY_VALUES


def _load():
    if legacy_keras_requested():
        try:
            import tf_keras  # noqa: F401 - fails early, naming the package, when it is missing
        except ImportError as error:
            raise ImportError(
                "TF_USE_LEGACY_KERAS is set, so lockstep.keras uses Keras 2 from the tf-keras "
                "package, which is not installed: pip install tf-keras (the version matching "
                "TensorFlow's)"
            ) from error
        import tensorflow as tf

        return tf.keras, True
    import keras

    return keras, False


keras, LEGACY = _load()


def backend_name():
    """The Keras backend: Keras 2 always runs on TensorFlow."""
    return "tensorflow" if LEGACY else keras.backend.backend()


def to_numpy(value):
    if LEGACY:
        return np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    return keras.ops.convert_to_numpy(value)


def to_tensor(value):
    if LEGACY:
        import tensorflow as tf

        return tf.convert_to_tensor(value)
    return keras.ops.convert_to_tensor(value)


def optimizer_classes():
    """The optimizer base classes DistributedOptimizer can wrap: Keras 3's, or Keras 2's
    current and legacy (OptimizerV2) ones."""
    if LEGACY:
        return (keras.optimizers.Optimizer, keras.optimizers.legacy.Optimizer)
    return (keras.optimizers.Optimizer,)


def is_optimizer(value):
    return isinstance(value, optimizer_classes())


def is_legacy_optimizer(optimizer):
    return LEGACY and isinstance(optimizer, keras.optimizers.legacy.Optimizer)


def optimizer_variables(optimizer):
    """All of an optimizer's variables (a method on Keras 2's legacy optimizers)."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def build_optimizer(optimizer, trainable_variables):
    """Create the optimizer's slots now (they are otherwise made on the first update),
    so they can be broadcast before training."""
    if is_legacy_optimizer(optimizer):
        optimizer._create_all_weights(trainable_variables)  # noqa: SLF001 - OptimizerV2's slot creation
    elif not getattr(optimizer, "built", False) and not getattr(optimizer, "_built", False):
        optimizer.build(trainable_variables)


def load_model(filepath, custom_objects, compile, safe_mode):  # noqa: A002 - Keras' argument name
    if LEGACY:
        return keras.models.load_model(filepath, custom_objects=custom_objects, compile=compile, safe_mode=safe_mode)
    return keras.saving.load_model(filepath, custom_objects=custom_objects, compile=compile, safe_mode=safe_mode)
