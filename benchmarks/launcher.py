"""Starting one benchmark script under mpirun and collecting its JSON."""

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
# Library output nobody needs between the progress lines.
NOISE_PREFIXES = ("[Gloo] Rank",)


class LaunchFailed(Exception):
    pass


def job_environment(extra=None):
    """mpirun's environment: no inherited lockstep settings, lockstep importable
    from the source tree (or LOCKSTEP_BENCH_PACKAGE_ROOT), Open MPI
    yielding when idle (busy-polling ranks steal the other rank's core on two
    cores), and root allowed, as in containers and CI."""
    # Settings inherited from the shell would silently change what is measured.
    env = {name: value for name, value in os.environ.items() if not name.startswith(("LOCKSTEP_", "HOROVOD_"))}
    # LOCKSTEP_BENCH_PACKAGE_ROOT: another build's package folder (e.g. the system-MPI
    # build's, build-system-mpi/python), to compare MPIs side by side.
    python_dir = os.environ.get("LOCKSTEP_BENCH_PACKAGE_ROOT") or os.path.join(REPO_ROOT, "python")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (python_dir, env.get("PYTHONPATH")) if p)
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    env["OMPI_MCA_osc"] = "^ucx"  # as lockstep sets it: mpi4py-only jobs print UCX errors otherwise
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    env.update(extra or {})
    return env


def binding_for(ranks):
    """Open MPI's own default for `mpirun -np 2` on this machine: each rank bound to a
    core while there are enough cores, so every variant runs as a plain mpirun user's
    job would. Unbound, the scheduler moves the four busy threads of two ranks (main
    and background or helper threads) across two cores, which measured 2x slower
    small-op latency for every variant."""
    return "core" if ranks <= (os.cpu_count() or 1) else "none"


@functools.lru_cache(maxsize=None)
def built_mpi():
    """The mpirun and libmpi of the MPI lockstep was built against (asked in a child
    process, so this one loads no MPI): every job runs on them, mpi4py's raw-MPI
    comparators included (MPI4PY_LIBMPI), so ratios compare like with like."""
    query = (
        "from lockstep.launcher import mpi_launcher; info = mpi_launcher.mpi_info(); "
        "print(mpi_launcher.find_mpirun() or 'mpirun'); print(info['library_path'] if info else '')"
    )
    env = job_environment()
    found = subprocess.run([sys.executable, "-c", query], env=env, capture_output=True, text=True, timeout=120)
    lines = found.stdout.strip().splitlines()[-2:]
    return (lines[0], lines[1]) if len(lines) == 2 else ("mpirun", "")


def mpirun_command(ranks, script, args, forwarded):
    mpirun, _ = built_mpi()
    command = [mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to", binding_for(ranks)]
    for name in forwarded:
        command += ["-x", name]
    return command + [sys.executable, os.path.join(BENCH_DIR, script), *args]


def run_benchmark(script, ranks, out_path, args=(), settings=None, timeout_s=300):
    """Run `script` on `ranks` ranks, stream its progress, return its JSON.

    `settings` are extra environment variables (e.g. LOCKSTEP_FUSION_THRESHOLD).
    Raises LaunchFailed if the job fails, times out or writes no result.
    """
    settings = settings or {}
    env = job_environment(settings)
    _, libmpi = built_mpi()
    if libmpi:
        env["MPI4PY_LIBMPI"] = libmpi
    forwarded = ["PYTHONPATH", "OMPI_MCA_mpi_yield_when_idle", "OMPI_MCA_osc", "MPI4PY_LIBMPI", *settings]
    command = mpirun_command(ranks, script, ["--out", out_path, *args], forwarded)
    started = time.monotonic()
    try:
        output = _run_streaming(command, env, timeout_s)
    except subprocess.TimeoutExpired:
        raise LaunchFailed(f"{script} on {ranks} rank(s) took more than {timeout_s} s") from None
    if output.returncode != 0:
        tail = "\n".join(output.lines[-30:])
        raise LaunchFailed(f"{script} on {ranks} rank(s) exited with {output.returncode}:\n{tail}")
    if not os.path.isfile(out_path):
        raise LaunchFailed(f"{script} on {ranks} rank(s) wrote no {out_path}")
    with open(out_path) as stream:
        result = json.load(stream)
    result["wall_s"] = time.monotonic() - started
    return result


class _Output:
    def __init__(self):
        self.lines = []
        self.returncode = None


def _run_streaming(command, env, timeout_s):
    """Run `command`, echoing its output line by line; kill it after `timeout_s`."""
    output = _Output()
    # A new session, so a timeout can stop mpirun and every rank it started.
    with subprocess.Popen(
        command,
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as process:
        watchdog = _Watchdog(process, timeout_s)
        try:
            for line in process.stdout:
                line = line.rstrip("\n")
                output.lines.append(line)
                if not line.startswith(NOISE_PREFIXES):
                    print(line, flush=True)
            output.returncode = process.wait()
        finally:
            watchdog.cancel()
    if watchdog.fired:
        raise subprocess.TimeoutExpired(command, timeout_s)
    return output


class _Watchdog:
    """Kills the process's whole session if it is still running after `timeout_s`."""

    def __init__(self, process, timeout_s):
        self.fired = False
        self._process = process
        self._timer = threading.Timer(timeout_s, self._kill)
        self._timer.daemon = True
        self._timer.start()

    def cancel(self):
        self._timer.cancel()

    def _kill(self):
        self.fired = True
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended on its own just now
            pass
