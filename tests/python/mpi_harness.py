"""Launches a rank script under mpirun with a hard timeout and reports what happened.

Every launch is bounded: on timeout the whole process group is killed, so a hang
shows up as a failed test instead of a stuck suite. A script's named checks become
tests of their own through check_plugin.py (tests/README.md); assert_all_ranks_passed
serves scripts that report only `rank <r>: ALL CHECKS PASSED`.
"""

import functools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# For suites that run many checks per job: a collective that some rank never submits
# (a check that failed on one rank) fails on the others after this long instead of
# leaving them waiting until the job's timeout.
DESYNC_LIMIT = {"LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "60"}
SCRIPTS_DIR = Path(__file__).resolve().parent / "scripts"
# The folder holding the `lockstep` package under test: the in-tree python/, or the
# sanitizer build's copy (make sanitize sets LOCKSTEP_TEST_PACKAGE_ROOT).
PACKAGE_ROOT = Path(os.environ.get("LOCKSTEP_TEST_PACKAGE_ROOT", REPO_ROOT / "python"))


@dataclass
class MpiRun:
    command: list
    returncode: int
    stdout: str
    stderr: str
    elapsed: float
    timed_out: bool

    def describe(self):
        status = "timed out" if self.timed_out else f"exit status {self.returncode}"
        return (
            f"{' '.join(self.command)}\n{status} after {self.elapsed:.1f} s\n"
            f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
        )

    def assert_all_ranks_passed(self, num_ranks):
        assert not self.timed_out and self.returncode == 0, self.describe()
        for rank in range(num_ranks):
            assert f"rank {rank}: ALL CHECKS PASSED" in self.stdout, f"rank {rank} did not finish\n{self.describe()}"


def child_environment(extra_env):
    # Rank scripts check with assert: PYTHONOPTIMIZE in the caller's shell would strip
    # every check and turn the suite green unchecked (test_harness.py proves it does not).
    env = {key: value for key, value in os.environ.items() if key != "PYTHONOPTIMIZE"}
    python_path = str(PACKAGE_ROOT)
    env["PYTHONPATH"] = python_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # Ranks outnumber cores here; without this, MPI busy-waits and starves its peers.
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    # Open MPI 5's libfabric BTL probes for fabrics in MPI_Init: 1.0 s of every launch on
    # a machine without one (0.05 s without it), several minutes over the suite. Tests
    # use shared memory and TCP only; a cluster's users keep their MPI's default.
    env.setdefault("OMPI_MCA_btl", "^ofi")
    env.update(extra_env or {})
    return env


@functools.lru_cache(maxsize=None)
def _launch_facts():
    """What the package under test says of its MPI and launcher, asked in a child
    process: loading the core here would load MPI into pytest before the frameworks
    some tests import."""
    query = (
        "import json; from lockstep.launcher import mpi_launcher; "
        "print(json.dumps({'mpirun': mpi_launcher.find_mpirun() or '', 'info': mpi_launcher.mpi_info()}))"
    )
    found = subprocess.run(
        [sys.executable, "-c", query], env=child_environment(None), capture_output=True, text=True, timeout=120
    )
    lines = found.stdout.strip().splitlines()
    assert lines, f"the package under test does not load:\n{found.stderr}"
    return json.loads(lines[-1])


def mpirun():
    """The mpirun of the MPI the package under test was built against (what
    lockstep-run uses too): Open MPI 5 from .venv by default, Debian's Open MPI 4.1 for
    the system-MPI build."""
    return _launch_facts()["mpirun"] or "mpirun"


def mpi_info():
    """lockstep._core.mpi_info() of the package under test."""
    return _launch_facts()["info"]


def run_ranks(script, num_ranks, timeout=120, env=None, args=(), mpirun_args=()):
    """Run tests/python/scripts/<script> on num_ranks ranks; never raises on failure."""
    command = [
        mpirun(),
        *mpirun_args,
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        str(num_ranks),
        sys.executable,
        str(SCRIPTS_DIR / script),
        *map(str, args),
    ]
    return run_mpirun(command, child_environment(env), timeout)


def run_mpirun(command, env, timeout):
    """An mpirun `command` with environment `env`, stopped after `timeout` seconds; never
    raises on failure."""
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        stdout, stderr = _stop(process)
    return MpiRun(command, process.returncode, stdout, stderr, time.monotonic() - started, timed_out)


def _stop(process):
    # SIGTERM first so mpirun can tear its ranks down; then kill the whole group.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.communicate()
