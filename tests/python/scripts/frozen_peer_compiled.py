"""A rank freezes (SIGSTOP) while the others run an allreduce inside a compiled
function (tf.function or jax.jit), or Keras' fit() on the JAX backend: every other
rank's call must raise an error naming the frozen rank, through the framework's own
error path, within the peer timeout. For fit() that error is lockstep's own, short
one (JAX chains a failed step's error into every later step's).

Usage: frozen_peer_compiled.py tensorflow|jax|keras-jax
"""

import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
FRAMEWORK = sys.argv[1]
FREEZING_RANK = 2
CALLS_BEFORE_FREEZING = 50 if FRAMEWORK != "keras-jax" else 2

if FRAMEWORK == "keras-jax":
    os.environ["KERAS_BACKEND"] = "jax"
    import keras
    import numpy as np

    import lockstep.keras as hvd

    hvd.init()
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
    features, targets = np.ones((64, 8), np.float32), np.zeros((64, 4), np.float32)

    class FreezeMidFit(keras.callbacks.Callback):
        """Rank 2 freezes inside the long fit(), after its start's broadcast. No batch
        hooks: Keras keeps dispatching steps without waiting for their logs."""

        def on_epoch_begin(self, epoch, logs=None):
            if fits > CALLS_BEFORE_FREEZING and epoch == 3 and hvd.rank() == FREEZING_RANK:
                os.kill(os.getpid(), signal.SIGSTOP)

    # verbose=0: nothing else makes fit() wait for a step.
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), FreezeMidFit()]
    fits = 0

    def call():
        global fits
        fits += 1  # the first fits are short; the one during the freeze would take minutes
        epochs = 2 if fits <= CALLS_BEFORE_FREEZING else 100_000
        model.fit(features, targets, batch_size=8, epochs=epochs, verbose=0, callbacks=callbacks)
        return [hvd.size()]
elif FRAMEWORK == "jax":
    import jax
    import jax.numpy as jnp

    import lockstep.jax as hvd

    hvd.init()
    step = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, name="frozen.peer"))
    x = jnp.ones(4)

    def call():
        return step(x).block_until_ready()
else:
    import tensorflow as tf

    import lockstep.tensorflow as hvd

    hvd.init()
    step = tf.function(lambda x: hvd.allreduce(x, op=hvd.Sum, name="frozen.peer"))
    x = tf.ones([4])

    def call():
        return step(x).numpy()


rank, size = hvd.rank(), hvd.size()
for _ in range(CALLS_BEFORE_FREEZING):
    assert float(call()[0]) == size
print(f"rank {rank}: first calls done", flush=True)
if rank == FREEZING_RANK and FRAMEWORK != "keras-jax":  # that one freezes inside fit()
    os.kill(os.getpid(), signal.SIGSTOP)  # mpirun kills it once the others have failed
started = time.monotonic()
try:
    while time.monotonic() - started < 120:
        call()
    print(f"rank {rank}: UNEXPECTED: still running after 120 s", flush=True)
except Exception as error:  # the framework's own exception type wraps lockstep's message
    message = " ".join(str(error).split())
    if len(message) > 2000:
        print(f"rank {rank}: UNEXPECTED: a {len(message)}-character error", flush=True)
    print(
        f"rank {rank}: RAISED after {time.monotonic() - started:.1f} s: {type(error).__name__}: {message}", flush=True
    )
    sys.exit(1)
