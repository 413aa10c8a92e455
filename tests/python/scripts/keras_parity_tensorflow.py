"""TensorFlow-side Horovod parity checks shared by both Keras lines (issue 25):
SyncBatchNormalization's Horovod arguments and PartialDistributedGradientTape with
Keras variables and tf.Variables."""

import numpy as np
import tensorflow as tf
from rank_checks import expect_error

import lockstep.tensorflow as hvd
from lockstep.keras.keras_line import LEGACY, keras


def check_sync_batch_norm(rank, size):
    """Horovod's arguments are accepted (fused=False and Keras 2's options left off),
    fused=True/None refused as in Horovod, and the statistics are global."""
    options = {
        "fused": False,
        "renorm": False,
        "renorm_clipping": None,
        "renorm_momentum": 0.9,
        "virtual_batch_size": None,
        "adjustment": None,
    }
    layer = hvd.SyncBatchNormalization(momentum=0.0, **options)
    rows = np.arange(2 * size, dtype=np.float32).reshape(size, 2)  # rank r holds row r
    layer(tf.constant(rows[rank : rank + 1]), training=True)
    moving_mean = np.asarray(layer.moving_mean.numpy() if hasattr(layer.moving_mean, "numpy") else layer.moving_mean)
    np.testing.assert_allclose(moving_mean, rows.mean(axis=0), rtol=1e-6, err_msg="global batch mean")
    for fused in (True, None):
        expect_error(ValueError, ["fused"], hvd.SyncBatchNormalization, fused=fused)
    if not LEGACY:
        expect_error(ValueError, ["renorm", "Keras 2"], hvd.SyncBatchNormalization, renorm=True)
        expect_error(ValueError, ["virtual_batch_size"], hvd.SyncBatchNormalization, virtual_batch_size=2)


def check_partial_tape(rank, size):
    """Local layers keep their gradients (divided by the size, Horovod's
    scale_local_gradients) and the rest is averaged, whether the sources are Keras
    variables or tf.Variables and whether locals are registered as either."""
    local, shared = _dense(), _dense()
    x = tf.constant([[rank + 1.0]])
    mean = (size + 1) / 2.0

    def gradients(sources, register=None, layers=None):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(local(x) + shared(x))
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=layers)
        if register is not None:
            tape.register_local_source(register)
        return [np.asarray(grad).item() for grad in tape.gradient(loss, sources)]

    as_keras = [local.kernel, shared.kernel]
    as_tf = [_tf_variable(v) for v in as_keras]
    expected = [float(np.float32(rank + 1.0) / np.float32(size)), mean]
    for sources in (as_keras, as_tf):
        assert gradients(sources, layers=[local]) == expected, "local_layers"
        assert gradients(sources, layers=local) == expected, "one local layer"
        for register in (as_keras[0], as_tf[0]):
            assert gradients(sources, register=register) == expected, "register_local_source"
    expect_error(
        TypeError,
        ["local_layers"],
        hvd.PartialDistributedGradientTape,
        tf.GradientTape(),
        local_layers=[tf.Variable(1.0)],
    )


def _dense():
    layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    layer.build((None, 1))
    return layer


def _tf_variable(variable):
    # A Keras 3 variable wraps a tf.Variable; Keras 2's are tf.Variables.
    inner = getattr(variable, "value", None)
    return inner if isinstance(inner, tf.Variable) else variable
