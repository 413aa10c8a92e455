"""lockstep.jax training on a GPU under mpirun (tests/gpu/test_gpu_jax.py): the CPU
suite's optax checks (tests/python/scripts/jax_training.py) with parameters, batches
and jitted steps on the GPU: broadcast_parameters, DistributedOptimizer matching
single-process training on the full batch (also with backward_passes_per_step and
gradient_predivide_factor) with identical parameters on every rank, the gradient
pytree handed over in one custom call (fused by the core: on the CPU the timeline
shows it; the GPU path records no timeline phases, and the core's GPU tests check its
fusion), compression, and alltoall's splits without x64.

float32 matmuls run at full precision: TF32 (JAX's default on recent GPUs) would round
the distributed and the full-batch steps differently. `--allow-cpu` runs the same
script on JAX's CPU backend, to try the script itself without a GPU.
"""

import sys

import jax

jax.config.update("jax_default_matmul_precision", "highest")

import jax_training as cpu_suite  # noqa: E402
import numpy as np  # noqa: E402
from rank_checks import assert_equal, run_main  # noqa: E402

import lockstep.jax as hvd  # noqa: E402

ON_GPU = "--allow-cpu" not in sys.argv


def check_trained_parameters_live_on_the_device(rank, size, params):
    """A few DistributedOptimizer steps leave the parameters on the GPU, identical on
    every rank bit for bit."""
    import optax

    tx = hvd.DistributedOptimizer(optax.adam(1e-2))
    step = cpu_suite.make_step(tx)
    trained, state = params, tx.init(params)
    for x, y in cpu_suite.batches(size, 4):
        trained, state, _ = step(trained, state, cpu_suite.shard(x, rank), cpu_suite.shard(y, rank))
    expected = {"gpu"} if ON_GPU else {"cpu"}
    for leaf in jax.tree.leaves(trained):
        platforms = {d.platform for d in leaf.devices()}
        assert platforms == expected, f"a trained parameter lives on {platforms}, expected {expected}"
    gathered = hvd.allgather_object([np.asarray(leaf) for leaf in jax.tree.leaves(trained)])
    for other in gathered:
        for a, b in zip(other, gathered[0]):
            assert_equal(a, b, "DistributedOptimizer on the GPU: identical parameters on every rank")


def check_gradients_in_one_call(rank, size, params):
    """The jitted step hands the whole gradient pytree to the core in one custom call
    (one group, which the core fuses), whatever the platform."""
    import optax

    tx = hvd.DistributedOptimizer(optax.sgd(0.1))
    x, y = next(cpu_suite.batches(size, 1))
    hlo = (
        cpu_suite.make_step(tx)
        .lower(params, tx.init(params), cpu_suite.shard(x, rank), cpu_suite.shard(y, rank))
        .as_text()
    )
    calls = hlo.count("custom_call @lockstep_collective(")  # StableHLO text
    assert calls == 1, f"a jitted step's gradients took {calls} custom calls, expected one for the whole pytree"
    print(f"rank {rank}: the gradient pytree of a jitted step is one custom call", flush=True)


def main():
    if ON_GPU:
        assert jax.default_backend() == "gpu", f"JAX's default backend is {jax.default_backend()}, not gpu"
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    params = cpu_suite.check_broadcast_parameters(rank, size)
    check_trained_parameters_live_on_the_device(rank, size, params)
    cpu_suite.check_matches_full_batch(rank, size, params)
    cpu_suite.check_matches_full_batch(rank, size, params, predivide=float(size))
    cpu_suite.check_matches_full_batch(rank, size, params, passes=2, steps=6)
    check_gradients_in_one_call(rank, size, params)
    if not ON_GPU:
        cpu_suite.check_gradient_pytree_is_fused(rank, size, params)
    cpu_suite.check_compression(rank, size, params)
    cpu_suite.check_alltoall_splits_without_x64(rank, size)
    print(f"rank {rank}: optax training on the device passed", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
