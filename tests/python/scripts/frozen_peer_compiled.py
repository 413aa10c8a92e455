"""A rank freezes (SIGSTOP) while the others run an allreduce inside a compiled
function (tf.function or jax.jit): every other rank's call must raise an error naming
the frozen rank, through the framework's own error path, within the peer timeout.

Usage: frozen_peer_compiled.py tensorflow|jax
"""

import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
FRAMEWORK = sys.argv[1]
FREEZING_RANK = 2
CALLS_BEFORE_FREEZING = 50

if FRAMEWORK == "jax":
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
if rank == FREEZING_RANK:
    os.kill(os.getpid(), signal.SIGSTOP)  # mpirun kills it once the others have failed
started = time.monotonic()
try:
    while time.monotonic() - started < 120:
        call()
    print(f"rank {rank}: UNEXPECTED: still running after 120 s", flush=True)
except Exception as error:  # the framework's own exception type wraps lockstep's message
    message = " ".join(str(error).split())
    print(
        f"rank {rank}: RAISED after {time.monotonic() - started:.1f} s: {type(error).__name__}: {message}", flush=True
    )
    sys.exit(1)
