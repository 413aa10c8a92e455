"""lockstep.tensorflow under mpirun: every op and dtype eagerly, in tf.function
and in a Session, gradients, fusion and independence of collectives in one graph,
DistributedGradientTape, variable broadcasts, TF1 sessions, SavedModel, errors
and faults."""

import pytest
from mpi_harness import run_ranks


@pytest.mark.rank_checks("tf_ranks.py")
def test_tensorflow_frontend(num_ranks, rank_check):
    run = rank_check.run(num_ranks, timeout=240)
    if rank_check.name == "independent_allreduces_fuse":
        assert "of independent allreduces in one tf.function were fused" in run.stdout, run.describe()


def test_regrouped_tensor_names_complete():
    """A group whose name returns with some members in the response cache and
    some not must still complete (it once hung: the cached members bypassed the
    coordinator, which waited for all of them). The stall settings turn a hang
    into a quick failure."""
    run = run_ranks(
        "tf_regroup.py",
        2,
        timeout=90,
        env={"LOCKSTEP_STALL_CHECK_TIME_SECONDS": "2", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "5"},
    )
    run.assert_all_ranks_passed(2)


def test_stalled_session_run_fails_and_a_dying_rank_ends_the_job(num_ranks):
    """One launch per rank count (TensorFlow's start-up costs more than both checks).
    A Session run whose collectives one rank never submits fails on the others with
    FailedPreconditionError after the stall shutdown time. Then, after an init without
    the stall settings, rank 1 dies in a tf.function's collectives: mpirun must end the
    job instead of hanging."""
    run = run_ranks(
        "tf_faults.py",
        num_ranks,
        timeout=120,
        args=["stall", "death"],
        env={"LOCKSTEP_STALL_CHECK_TIME_SECONDS": "1", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "3"},
    )
    for rank in range(num_ranks):
        assert f"rank {rank}: stall checks passed" in run.stdout, f"rank {rank}: stall\n{run.describe()}"
    assert not run.timed_out, f"mpirun hung after a rank died\n{run.describe()}"
    assert run.returncode != 0, f"mpirun reported success although rank 1 died\n{run.describe()}"
    assert "UNEXPECTED" not in run.stdout, run.describe()
    for rank in set(range(num_ranks)) - {1}:
        assert f"rank {rank}: first allreduce done" in run.stdout, f"rank {rank} died too early\n{run.describe()}"
