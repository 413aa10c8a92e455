"""lockstep.jax on a GPU under mpirun (tests/gpu/test_gpu_jax.py): every collective and
dtype (bfloat16 included), eagerly and inside jax.jit, exact against the CPU suite's
reference values, with the arrays on the GPU, so jitted calls take the CUDA FFI handler
and eager calls the same custom call; plus what only a GPU shows: results stay on the
device, the collectives ran on lockstep's GPU path, and XLA's stream orders them
against the kernels that produce their inputs and consume their results.

The checks come from tests/python/scripts/jax_collectives.py (on PYTHONPATH through
gpu_harness): jnp.asarray places arrays on JAX's default device, the GPU here.
`--allow-cpu` runs the same script on JAX's CPU backend, to try the script itself on a
machine without a GPU: eager CPU arrays then take the custom call too (the route eager
GPU arrays take), through the CPU handler.
"""

import sys

import jax
import jax.numpy as jnp
import jax_collectives as cpu_suite  # sets jax_enable_x64 (int64, float64)
import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.jax as hvd
from lockstep import _core
from lockstep.jax import device_arrays

ON_GPU = "--allow-cpu" not in sys.argv
if not ON_GPU:
    device_arrays.on_gpu = lambda *values: any(
        isinstance(v, jax.Array) and not isinstance(v, jax.core.Tracer) and len(v.devices()) == 1 for v in values
    )


def device_ordinal():
    """The CUDA ordinal of JAX's first device (what lockstep's stream is keyed by)."""
    device = jax.devices()[0]
    ordinal = getattr(device, "local_hardware_id", None)
    return device.id if ordinal is None else ordinal


def check_backend():
    if ON_GPU:
        assert jax.default_backend() == "gpu", f"JAX's default backend is {jax.default_backend()}, not gpu"


def check_results_stay_on_the_device(rank, size):
    """The first op of the process is eager, on a GPU array: it must take the GPU path
    (lockstep's stream exists afterwards) and return a GPU array; so must an eager
    allgather of uneven rows."""
    x = jnp.arange(6, dtype=jnp.float32) + rank
    out = hvd.allreduce(x, op=hvd.Sum)
    assert_equal(np.asarray(out), sum(np.arange(6, dtype=np.float32) + r for r in range(size)), "first eager allreduce")
    platforms = {d.platform for d in out.devices()}
    expected = {"gpu"} if ON_GPU else {"cpu"}
    assert platforms == expected, f"eager allreduce result lives on {platforms}, expected {expected}"
    if ON_GPU:
        stream = _core.gpu_stream(device_ordinal(), 0)
        assert stream != 0, "an eager allreduce of a GPU array did not go through lockstep's GPU path"
    gathered = hvd.allgather(jnp.ones((rank + 1, 2), jnp.bfloat16))  # uneven rows, eagerly
    assert {d.platform for d in gathered.devices()} == expected, "eager allgather left the device"
    assert gathered.shape == (size * (size + 1) // 2, 2), gathered.shape


def integral_chain(x, rounds):
    """Work on the device whose float32 values stay small integers (exact anywhere)."""
    for _ in range(rounds):
        x = jnp.mod(x * 3.0 + 1.0, 1021.0)
    return x


def numpy_chain(x, rounds):
    for _ in range(rounds):
        x = np.mod(x * np.float32(3.0) + np.float32(1.0), np.float32(1021.0)).astype(np.float32)
    return x


def check_stream_ordering(rank, size):
    """A 64 MiB input computed by kernels queued just before the collective, and a
    result consumed by kernels queued just after, inside one jitted function and
    eagerly: any missing wait (the ready event or the done event on XLA's stream)
    shows as wrong values."""
    # 64 MiB makes the kernels long enough on a GPU for a missing wait to show; on the
    # CPU backend (--allow-cpu: only trying the script) there is no stream to race.
    elements, rounds = (16 * 1024 * 1024 if ON_GPU else 64 * 1024), 24
    start = [(np.arange(elements, dtype=np.float32) % 1000 + r) for r in range(size)]
    reduced = sum(numpy_chain(s, rounds) for s in start)
    expected = np.mod(reduced * np.float32(2.0) + np.float32(1.0), np.float32(1021.0))
    gathered = np.concatenate([numpy_chain(s[:1024], rounds) for s in start])

    @jax.jit
    def step(x):
        y = integral_chain(x, rounds)
        z = hvd.allreduce(y, op=hvd.Sum)
        g = hvd.allgather(y[:1024])
        return jnp.mod(z * 2.0 + 1.0, 1021.0), g

    mine = jnp.asarray(start[rank])
    for repeat in range(3):
        out, g = step(mine)
        assert_equal(np.asarray(out), expected, f"jitted allreduce between kernels (run {repeat})")
        assert_equal(np.asarray(g), gathered, f"jitted allgather between kernels (run {repeat})")
    eager_in = integral_chain(mine, rounds)  # queued asynchronously
    eager_out = jnp.mod(hvd.allreduce(eager_in, op=hvd.Sum) * 2.0 + 1.0, 1021.0)
    assert_equal(np.asarray(eager_out), expected, "eager allreduce between kernels")


def main():
    check_backend()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check_results_stay_on_the_device(rank, size)
    for check_fn in (
        cpu_suite.check_allreduce,
        cpu_suite.check_grouped_allreduce,
        cpu_suite.check_allgather,
        cpu_suite.check_broadcast,
        cpu_suite.check_broadcast_of_unsigned_words,
        cpu_suite.check_alltoall,
        cpu_suite.check_reducescatter,
        cpu_suite.check_gradients,
        cpu_suite.check_vmap,
        check_stream_ordering,
    ):
        check_fn(rank, size)
        print(f"rank {rank}: {check_fn.__name__} passed", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
