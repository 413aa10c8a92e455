"""User errors fail clearly on every rank and never hang the job."""

import re

import pytest
from mpi_harness import run_ranks


@pytest.mark.rank_checks("error_cases.py")
def test_mismatches_duplicates_and_bad_arguments(num_ranks, rank_check):
    rank_check.run(num_ranks)


@pytest.mark.rank_checks("lifecycle.py")
def test_ops_before_init_after_shutdown_and_pending_at_shutdown(num_ranks, rank_check):
    rank_check.run(num_ranks)


def test_stalled_tensor_warns_and_fails_instead_of_hanging(num_ranks):
    env = {"LOCKSTEP_STALL_CHECK_TIME_SECONDS": "1", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "3"}
    run = run_ranks("stall.py", num_ranks, timeout=60, env=env)
    run.assert_all_ranks_passed(num_ranks)
    missing = num_ranks - 1
    warnings = [
        line
        for line in (run.stdout + run.stderr).splitlines()
        if "stalled.tensor" in line and "warning" in line.lower()
    ]
    assert warnings, f"no stall warning names the tensor\n{run.describe()}"
    assert any(re.search(rf"missing ranks?:?\s*{missing}\b", line) for line in warnings), (
        f"the stall warning does not name missing rank {missing}: {warnings}"
    )


@pytest.mark.parametrize("when", ["in_negotiation", "mid_large_allreduces"])
def test_a_dying_rank_ends_the_job(num_ranks, when):
    args = ["large"] if when == "mid_large_allreduces" else []
    run = run_ranks("rank_death.py", num_ranks, timeout=60, args=args)
    assert not run.timed_out, f"mpirun hung after a rank died\n{run.describe()}"
    assert run.returncode != 0, f"mpirun reported success although rank 1 died\n{run.describe()}"
    assert "UNEXPECTED" not in run.stdout, run.describe()
    for rank in set(range(num_ranks)) - {1}:
        assert f"rank {rank}: first allreduce done" in run.stdout, f"rank {rank} died too early\n{run.describe()}"
