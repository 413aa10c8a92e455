"""The test harness cannot be fooled into passing unchecked: the rank scripts and the
tests check with assert, which python -O (or PYTHONOPTIMIZE in the developer's shell)
would strip; a named check passes only when it reported ok on every rank."""

import os
import subprocess
import sys

import pytest
from check_reports import CheckCollectionError, CheckReports, collect_check_names
from mpi_harness import REPO_ROOT, SCRIPTS_DIR, MpiRun, run_ranks

CHECKS = ("passes", "fails_on_rank_one", "runs_after_a_failure")  # scripts/named_checks.py


def test_rank_checks_run_even_when_the_shell_sets_pythonoptimize(monkeypatch):
    monkeypatch.setenv("PYTHONOPTIMIZE", "1")
    run = run_ranks("failing_check.py", 2, timeout=60)
    assert run.returncode != 0 and "this check always fails" in run.stdout + run.stderr, run.describe()
    assert "ALL CHECKS PASSED" not in run.stdout, run.describe()


def _run_optimized(command):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SCRIPTS_DIR), str(REPO_ROOT / "tests" / "python")]))
    return subprocess.run(
        [sys.executable, "-O", *command], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60
    )


def test_a_rank_script_started_optimized_by_hand_refuses_to_run():
    run = _run_optimized([str(SCRIPTS_DIR / "failing_check.py")])
    assert run.returncode != 0 and "PYTHONOPTIMIZE" in run.stderr, (run.returncode, run.stdout, run.stderr)
    assert "ALL CHECKS PASSED" not in run.stdout, run.stdout


def test_pytest_refuses_to_run_optimized():
    # Collecting only: without the refusal this exits 0.
    run = _run_optimized(["-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", __file__])
    assert run.returncode != 0 and "PYTHONOPTIMIZE" in run.stdout + run.stderr, (run.stdout, run.stderr)


# Named checks (scripts/checks.py, check_reports.py, check_plugin.py): each check is a
# test that passes only when it reported ok on every rank of a sound job.


def _reports(stdout, returncode=0, timed_out=False, num_ranks=2, selected=("a", "b")):
    run = MpiRun(["mpirun"], returncode, stdout, "", 1.0, timed_out)
    return CheckReports(run, num_ranks, collected=("a", "b"), selected=selected)


def _ok_lines(*names, ranks=(0, 1), finished=True):
    lines = [f"LOCKSTEP-CHECK rank={rank} ok {name}" for name in names for rank in ranks]
    return "\n".join(lines + ([f"rank {rank}: ALL CHECKS PASSED" for rank in ranks] if finished else []))


def test_a_check_failing_on_one_rank_fails_naming_that_rank_and_the_others_go_on():
    run = run_ranks("named_checks.py", 3, timeout=60)
    reports = CheckReports(run, 3, collect_check_names([SCRIPTS_DIR / "named_checks.py"]), CHECKS)
    failure = reports.failure_of("fails_on_rank_one")
    assert failure and "rank 1: FAILED: AssertionError: rank 1 disagrees" in failure, run.describe()
    assert "named_checks.py" in failure and "rank 0" not in failure and "rank 2" not in failure, failure
    assert reports.failure_of("passes") is None and reports.failure_of("runs_after_a_failure") is None, run.describe()
    assert "rank 1: FAILED checks: fails_on_rank_one" in run.stdout, run.describe()
    assert "rank 1: ALL CHECKS PASSED" not in run.stdout, run.describe()


def test_a_check_silent_on_one_rank_fails_although_the_job_exits_0():
    run = run_ranks("named_checks.py", 2, timeout=60, env={"LOCKSTEP_TEST_CASE": "rank_one_exits"})
    reports = CheckReports(run, 2, CHECKS, CHECKS)
    for name in CHECKS:
        failure = reports.failure_of(name)
        assert failure and "rank 1: never reported" in failure and "rank 0" not in failure.split("\n")[1], failure


def test_checks_run_even_when_the_shell_sets_pythonoptimize(monkeypatch):
    monkeypatch.setenv("PYTHONOPTIMIZE", "1")
    run = run_ranks("named_checks.py", 2, timeout=60)
    assert CheckReports(run, 2, CHECKS, CHECKS).failure_of("fails_on_rank_one"), run.describe()


def test_a_report_of_a_check_not_collected_or_not_selected_fails_every_check():
    stray = _reports(_ok_lines("a", "b", "c"))
    assert all("did not collect: ['c']" in stray.failure_of(name) for name in ("a", "b"))
    unselected = _reports(_ok_lines("a", "b"), selected=("a",))
    assert "not selected: ['b']" in unselected.failure_of("a")


def test_a_job_that_fails_with_every_check_passed_fails_every_check():
    assert _reports(_ok_lines("a", "b")).failure_of("a") is None
    for broken in (
        _reports(_ok_lines("a", "b"), returncode=1),
        _reports(_ok_lines("a", "b"), timed_out=True),
        _reports(_ok_lines("a", "b", finished=False)),
    ):
        assert all("did not finish cleanly" in broken.failure_of(name) for name in ("a", "b"))
    # A failed check explains the job's failure: the checks that passed still pass.
    failed = _ok_lines("a") + "\nLOCKSTEP-CHECK rank=0 ok b\nLOCKSTEP-CHECK rank=1 FAILED b: AssertionError: x"
    explained = _reports(failed, returncode=1)
    assert explained.failure_of("a") is None and "rank 1: FAILED: AssertionError: x" in explained.failure_of("b")


def test_reports_that_mpirun_joined_on_one_line_count_for_each_rank():
    # Open MPI 4.1's mpirun forwarded "...ok aLOCKSTEP-CHECK rank=1 ok a" as one line.
    joined = _ok_lines("a", "b").replace("\nLOCKSTEP-CHECK rank=1 ok a", "LOCKSTEP-CHECK rank=1 ok a")
    assert "ok aLOCKSTEP-CHECK rank=1" in joined
    assert _reports(joined).failure_of("a") is None


def test_a_check_reported_ok_and_failed_on_one_rank_fails():
    twice = _ok_lines("a", "b") + "\nLOCKSTEP-CHECK rank=0 FAILED a: round two"
    assert "rank 0: FAILED: round two" in _reports(twice, returncode=1).failure_of("a")


def test_collection_refuses_a_script_without_checks_and_names_that_are_not_literal(tmp_path):
    without = tmp_path / "without.py"
    without.write_text("from checks import check\n\ndef main():\n    assert True\n")
    with pytest.raises(CheckCollectionError, match="no check"):
        collect_check_names([without])
    dynamic = tmp_path / "dynamic.py"
    dynamic.write_text("from checks import check\n\nname = 'x'\ncheck(name, print)\n")
    with pytest.raises(CheckCollectionError, match="literal name"):
        collect_check_names([dynamic])


def _pytest_on_the_checked_suite(*options, env=None, test="test_named_checks"):
    suite = REPO_ROOT / "tests" / "python" / "harness_cases" / "checked_suite.py"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-rfE", "-p", "no:cacheprovider", f"{suite}::{test}", *options],
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        cwd=REPO_ROOT,
        timeout=120,
    )


def test_pytest_makes_one_test_per_check_and_a_failing_one_names_itself_and_its_rank():
    run = _pytest_on_the_checked_suite()
    assert run.returncode == 1 and "1 failed, 2 passed" in run.stdout, run.stdout + run.stderr
    assert "FAILED tests/python/harness_cases/checked_suite.py::test_named_checks[fails_on_rank_one]" in run.stdout
    assert "rank 1: FAILED: AssertionError: rank 1 disagrees" in run.stdout, run.stdout
    assert run.stdout.count("named_checks.py\n") <= 1, "one job for all the checks"


def test_pytest_k_runs_only_the_selected_checks_in_the_job():
    run = _pytest_on_the_checked_suite("-k", "passes")
    assert run.returncode == 0 and "1 passed, 2 deselected" in run.stdout, run.stdout + run.stderr
    assert "ok passes" in run.stdout and "fails_on_rank_one" not in run.stdout, run.stdout


def test_a_test_cannot_pass_when_its_check_does_not_report():
    run = _pytest_on_the_checked_suite("-k", "passes", env={"LOCKSTEP_TEST_CASE": "rank_one_exits"})
    assert run.returncode == 1 and "1 failed" in run.stdout and "rank 1: never reported" in run.stdout, run.stdout


def test_a_check_left_out_of_a_test_is_left_out_of_its_job():
    run = _pytest_on_the_checked_suite(test="test_named_checks_but_one")
    assert run.returncode == 1 and "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "ok passes" in run.stdout and "runs_after_a_failure" not in run.stdout, run.stdout


def test_only_keeps_just_the_checks_it_names_in_the_test_and_its_job():
    run = _pytest_on_the_checked_suite(test="test_named_checks_only_one")
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    assert "ok passes" in run.stdout and "fails_on_rank_one" not in run.stdout, run.stdout


def test_a_check_passes_only_if_it_passed_in_every_job_of_its_test():
    run = _pytest_on_the_checked_suite(test="test_named_checks_in_two_jobs")
    assert run.returncode == 1 and "3 failed" in run.stdout, run.stdout + run.stderr
    assert "launch 2: LOCKSTEP_CHECKS=(all)" in run.stdout and "launch 3" not in run.stdout, "each job once"
    assert "rank 1: FAILED: AssertionError: rank 1 disagrees" in run.stdout, run.stdout
    assert "in this test's job 2: check 'passes' failed" in run.stdout, run.stdout
    assert "rank 1: never reported" in run.stdout, run.stdout
    # The check that passed in the first job fails for the second, whose launch -k narrowed too.
    selected = _pytest_on_the_checked_suite("-k", "passes", test="test_named_checks_in_two_jobs")
    assert selected.returncode == 1 and "1 failed, 2 deselected" in selected.stdout, selected.stdout
    assert "launch 1: LOCKSTEP_CHECKS=passes" in selected.stdout, selected.stdout
    assert "launch 2: LOCKSTEP_CHECKS=passes" in selected.stdout, selected.stdout


def test_the_checks_of_a_job_must_launch_it_alike():
    run = _pytest_on_the_checked_suite(test="test_named_checks_launched_unalike")
    assert run.returncode == 1 and "must launch it alike" in run.stdout, run.stdout + run.stderr
