"""Run by test_harness.py through pytest itself (its name keeps it out of the suite):
the checks of scripts/named_checks.py as tests."""

import pytest


@pytest.mark.rank_checks("named_checks.py")
def test_named_checks(rank_check):
    run = rank_check.run(2, timeout=60)
    print(run.stdout)  # with -s: which checks the job ran


@pytest.mark.rank_checks("named_checks.py", without=["runs_after_a_failure"])
def test_named_checks_but_one(rank_check):
    run = rank_check.run(2, timeout=60)
    print(run.stdout)  # with -s: which checks the job ran
