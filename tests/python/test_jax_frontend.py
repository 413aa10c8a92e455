"""lockstep.jax under mpirun: collectives eagerly and inside jax.jit, gradients,
optax training, and errors inside jit that fail every rank instead of hanging."""

from mpi_harness import run_ranks

# A hang turns into a failure within seconds instead of the harness timeout.
FAST_STALLS = {"LOCKSTEP_STALL_CHECK_TIME_SECONDS": "2", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "6"}


def test_jax_collectives(num_ranks):
    run = run_ranks("jax_collectives.py", num_ranks, timeout=240, env=FAST_STALLS)
    run.assert_all_ranks_passed(num_ranks)
    assert "allreduces in one jitted function, 3 runs" in run.stdout, run.describe()
    assert "scaled float allreduces inside jit equal eager bit for bit" in run.stdout, run.describe()


def test_jax_training_and_errors_fail_every_rank(num_ranks):
    """One launch per rank count (JAX's start-up and compiles cost more than the
    checks): training, then errors inside jit, which must fail every rank."""
    run = run_ranks("jax_training.py", num_ranks, timeout=300, env=FAST_STALLS)
    run.assert_all_ranks_passed(num_ranks)
    assert "gradients of each jitted step fused" in run.stdout, run.describe()
    assert "gradients reduced in place, in buckets" in run.stdout, run.describe()
    for rank in range(num_ranks):
        assert f"rank {rank}: mismatch inside jit raised" in run.stdout, run.describe()
