"""lockstep.jax under mpirun: collectives eagerly and inside jax.jit, gradients,
optax training, and errors inside jit that fail every rank instead of hanging."""

import pytest

# A hang turns into a failure within seconds instead of the harness timeout.
FAST_STALLS = {"LOCKSTEP_STALL_CHECK_TIME_SECONDS": "2", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "6"}


# What a check prints when it got through (its report says as much; these say how much).
CHECK_SAYS = {
    "allreduce": "allreduces in one jitted function, 3 runs",
    "scaling_matches_eager": "scaled float allreduces inside jit equal eager bit for bit",
}
TRAINING_CHECK_SAYS = {
    "gradient_pytree_is_fused": "gradients of each jitted step fused",
    "in_place_reduction": "gradients reduced in place, in buckets",
}


@pytest.mark.rank_checks("jax_collectives.py")
def test_jax_collectives(num_ranks, rank_check):
    run = rank_check.run(num_ranks, timeout=240, env=FAST_STALLS)
    assert CHECK_SAYS.get(rank_check.name, "") in run.stdout, run.describe()


@pytest.mark.rank_checks("jax_training.py", "jax_errors.py")
def test_jax_training_and_errors_fail_every_rank(num_ranks, rank_check):
    """One launch per rank count (JAX's start-up and compiles cost more than the
    checks): training, then errors inside jit, which must fail every rank."""
    run = rank_check.run(num_ranks, timeout=300, env=FAST_STALLS)
    assert TRAINING_CHECK_SAYS.get(rank_check.name, "") in run.stdout, run.describe()
    if rank_check.name == "mismatched_shapes_fail_everywhere":
        for rank in range(num_ranks):
            assert f"rank {rank}: mismatch inside jit raised" in run.stdout, run.describe()
