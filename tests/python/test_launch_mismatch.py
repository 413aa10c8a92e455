"""lockstep started by a launcher that does not belong to the MPI it was built against,
or by plain python where the environment says a launcher started it: init() fails on
every process with a message naming both sides; nothing hangs and no process trains
alone.

The cross-MPI cases need a second build against Debian's Open MPI 4.1: `make test`'s
system-MPI stage (tests/system_mpi/system_mpi.mk) builds it and runs this file; the
pytest stage before it, where that build may not exist yet, runs only the plain-python
case.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mpi_harness import REPO_ROOT, SCRIPTS_DIR, child_environment, run_mpirun

DEFAULT_ROOT = REPO_ROOT / "python"  # built against Open MPI 5 from PyPI (make build)
SYSTEM_ROOT = REPO_ROOT / "build-system-mpi" / "python"  # against /usr/bin/mpicc (4.1)
SYSTEM_MPIRUN = "/usr/bin/mpirun"
WHEEL_MPIRUN = str(Path(sys.prefix) / "bin" / "mpirun")
SCRIPT = str(SCRIPTS_DIR / "launch_check.py")


def both_builds():
    if not list((SYSTEM_ROOT / "lockstep").glob("_core*.so")) or not os.access(SYSTEM_MPIRUN, os.X_OK):
        pytest.skip("needs the system-MPI build (make test-system-mpi) and Debian's Open MPI 4.1")


def launch(mpirun, package_root, ranks=2):
    env = child_environment(None)
    env["PYTHONPATH"] = str(package_root)
    command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), sys.executable, SCRIPT]
    return run_mpirun(command, env, timeout=90)


def assert_every_rank_refused(run, ranks, *names):
    assert not run.timed_out, run.describe()
    assert run.returncode != 0, run.describe()
    assert "init succeeded" not in run.stdout, run.describe()
    refusals = [line for line in run.stdout.splitlines() if line.startswith("init failed")]
    assert len(refusals) == ranks, run.describe()
    for line in refusals:
        for name in names:
            assert name in line, run.describe()


@pytest.mark.parametrize("ranks", [2, 3])
def test_open_mpi_4_launcher_refused_by_a_build_against_open_mpi_5(ranks):
    both_builds()
    run = launch(SYSTEM_MPIRUN, DEFAULT_ROOT, ranks)
    assert_every_rank_refused(run, ranks, "Open MPI 5.0.11", "Open MPI 4 or older (ORTE)", WHEEL_MPIRUN)


@pytest.mark.parametrize("ranks", [2, 3])
def test_open_mpi_5_launcher_refused_by_a_build_against_open_mpi_4(ranks):
    both_builds()
    run = launch(WHEEL_MPIRUN, SYSTEM_ROOT, ranks)
    assert_every_rank_refused(run, ranks, "Open MPI 4.1", "Open MPI 5.0.11 (PRRTE)", SYSTEM_MPIRUN)


def test_each_build_runs_under_its_own_launcher():
    both_builds()
    for mpirun, root in ((WHEEL_MPIRUN, DEFAULT_ROOT), (SYSTEM_MPIRUN, SYSTEM_ROOT)):
        run = launch(mpirun, root)
        assert run.returncode == 0 and run.stdout.count("init succeeded") == 2, run.describe()
        assert "of 2" in run.stdout, run.describe()


def test_plain_python_where_a_launcher_was_expected_fails_at_init():
    env = child_environment({"HOROVOD_SIZE": "4", "HOROVOD_RANK": "1"})
    result = subprocess.run([sys.executable, SCRIPT], env=env, capture_output=True, text=True, timeout=90)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "HOROVOD_SIZE=4" in result.stdout and "plain python" in result.stdout, result.stdout


def test_plain_python_alone_runs_as_one_rank():
    env = child_environment(None)
    for name in ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        env.pop(name, None)
    result = subprocess.run([sys.executable, SCRIPT], env=env, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0 and "rank 0 of 1" in result.stdout, result.stdout + result.stderr
