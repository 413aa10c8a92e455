"""Loading a saved model with its optimizer rewrapped as a DistributedOptimizer."""

from lockstep.common.ops import Average
from lockstep.keras import keras_line
from lockstep.keras.compression import Compression
from lockstep.keras.optimizer import rewrap_in_place


def load_model(
    filepath,
    custom_optimizers=None,
    custom_objects=None,
    compression=Compression.none,
    sparse_as_dense=False,
    gradient_predivide_factor=1.0,
    op=Average,
    compile=True,
    safe_mode=True,
):
    """keras.saving.load_model, then make the restored optimizer distributed.

    The optimizer keeps the state restored from the file (slots, step count);
    resume training with BroadcastGlobalVariablesCallback so every rank starts
    from it. custom_optimizers: optimizer classes of your own that the file may
    name (added to custom_objects).
    """
    objects = dict(custom_objects or {})
    for optimizer_class in custom_optimizers or ():
        objects.setdefault(optimizer_class.__name__, optimizer_class)
    model = keras_line.load_model(filepath, objects, compile, safe_mode)
    if getattr(model, "optimizer", None) is not None:
        rewrap_in_place(model.optimizer, compression, sparse_as_dense, gradient_predivide_factor, op)
    return model
