"""The test harness cannot be fooled into passing unchecked: the rank scripts and the
tests check with assert, which python -O (or PYTHONOPTIMIZE in the developer's shell)
would strip."""

import os
import subprocess
import sys

from mpi_harness import REPO_ROOT, SCRIPTS_DIR, run_ranks


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
