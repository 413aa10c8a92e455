"""Run by test_harness.py through pytest itself (its name keeps it out of the suite):
the checks of scripts/named_checks.py as tests."""

import pytest
from mpi_harness import run_ranks

LAUNCHES = []


@pytest.mark.rank_checks("named_checks.py")
def test_named_checks(rank_check):
    run = rank_check.run(2, timeout=60)
    print(run.stdout)  # with -s: which checks the job ran


@pytest.mark.rank_checks("named_checks.py", without=["runs_after_a_failure"])
def test_named_checks_but_one(rank_check):
    run = rank_check.run(2, timeout=60)
    print(run.stdout)  # with -s: which checks the job ran


@pytest.mark.rank_checks("named_checks.py", only=["passes"])
def test_named_checks_only_one(rank_check):
    run = rank_check.run(2, timeout=60)
    print(run.stdout)  # with -s: which checks the job ran


def launch(timeout, env):
    """A launch of the test's own (as a pretend cluster's or lockstep-run's would be)."""
    LAUNCHES.append(env)
    print(f"launch {len(LAUNCHES)}: LOCKSTEP_CHECKS={env.get('LOCKSTEP_CHECKS', '(all)')}")
    return run_ranks("named_checks.py", 2, timeout, env=env)


@pytest.mark.rank_checks("named_checks.py")
def test_named_checks_in_two_jobs(rank_check):
    # The second job's rank 1 exits inside the first check: no check passes there.
    rank_check.run_by(2, launch, 60)
    rank_check.run_by(2, launch, 60, env={"LOCKSTEP_TEST_CASE": "rank_one_exits"})


@pytest.mark.rank_checks("named_checks.py")
def test_named_checks_launched_unalike(rank_check):
    rank_check.run(2, timeout=60 if rank_check.name == "passes" else 61)
