"""A pretend cluster on one machine: network namespaces as hosts, for multi-host tests.

Each pretend host is a network namespace with its own loopback and one veth link to a
bridge in the root namespace, holding an address in a private test subnet. Commands
run on a host through `ip netns exec` under `unshare --uts`, so each host also has its
own hostname. mpirun starts on the first host and reaches the others through a small
rsh agent script that does the same, exactly as it would reach real hosts over ssh;
Open MPI is kept on the test subnet.

    with PretendCluster([2, 2, 1]) as cluster:          # 5 slots on 3 hosts
        run = cluster.mpirun(["python", "script.py"], num_ranks=5)

    python tests/python/pretend_cluster.py --slots 2,2,1 -- python bench.py

Needs root and iproute2 (`ip`); `unavailable_reason()` says why not otherwise. Every
name carries a per-run tag, and a marker file records the owning process, so a run
that crashed leaves nothing that breaks the next one: leftovers of dead owners are
removed when the next cluster starts.
"""

import argparse
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mpi_harness  # noqa: E402

sys.path.insert(0, str(mpi_harness.PACKAGE_ROOT))
from lockstep.launcher import mpi_launcher  # noqa: E402  (the launcher module only: no core)

MARKER_DIR = Path("/tmp/lockstep-pretend-cluster")
NAME_PREFIX = "lsc"  # namespaces lsc<tag>h<i>; links lsb<tag> (bridge), lsv<tag>h<i>
SUBNET_PREFIX = "10.213.7"
SUBNET = SUBNET_PREFIX + ".0/24"


def unavailable_reason():
    """None when namespaces can be made here, else why the pretend cluster cannot run."""
    if os.geteuid() != 0:
        return "the pretend cluster needs root (network namespaces)"
    for tool in ("ip", "unshare", mpi_harness.mpirun()):
        if shutil.which(tool) is None:
            return f"the pretend cluster needs `{tool}` (apt packages iproute2, util-linux; make setup)"
    probe = f"{NAME_PREFIX}probe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create network namespaces here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


def _ip(*args, check=True):
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")
    return result


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace_processes(namespace):
    pids = _ip("netns", "pids", namespace, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _remove_tag(tag):
    """Removes everything a run with this tag made; safe to call on partial set-ups."""
    namespaces = [
        line.split()[0]
        for line in _ip("netns", "list", check=False).stdout.splitlines()
        if line.startswith(f"{NAME_PREFIX}{tag}h")
    ]
    for namespace in namespaces:
        _kill_namespace_processes(namespace)
    for namespace in namespaces:
        _ip("netns", "delete", namespace, check=False)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name == f"lsb{tag}" or name.startswith(f"lsv{tag}h"):
            _ip("link", "delete", name, check=False)
    for workdir in Path(tempfile.gettempdir()).glob(f"lockstep-cluster-{tag}-*"):
        shutil.rmtree(workdir, ignore_errors=True)
    (MARKER_DIR / tag).unlink(missing_ok=True)


def remove_leftovers():
    """Removes clusters whose owning process has died (a crashed or killed run)."""
    if not MARKER_DIR.is_dir():
        return
    for marker in MARKER_DIR.iterdir():
        try:
            owner = int(marker.read_text().strip() or 0)
        except (OSError, ValueError):
            owner = 0
        if owner <= 0 or not _alive(owner):
            _remove_tag(marker.name)


class PretendCluster:
    """Hosts `node1`, `node2`, ... with the given slots each; a context manager."""

    def __init__(self, slots=(2, 2, 1)):
        self.slots = list(slots)
        self.tag = secrets.token_hex(3)
        self.hostnames = [f"node{i + 1}" for i in range(len(self.slots))]
        self.addresses = [f"{SUBNET_PREFIX}.{i + 1}" for i in range(len(self.slots))]
        self.namespaces = [f"{NAME_PREFIX}{self.tag}h{i}" for i in range(len(self.slots))]
        self.links = [f"lsv{self.tag}h{i}" for i in range(len(self.slots))]  # root-side ends
        self.bridge = f"lsb{self.tag}"
        self.workdir = None
        self.agent = None
        self.hostfile = None

    # --- set-up and tear-down -------------------------------------------------
    def __enter__(self):
        remove_leftovers()
        MARKER_DIR.mkdir(parents=True, exist_ok=True)
        (MARKER_DIR / self.tag).write_text(str(os.getpid()))  # before anything is made
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        _remove_tag(self.tag)
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _create(self):
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        for namespace, link, address in zip(self.namespaces, self.links, self.addresses):
            _ip("netns", "add", namespace)
            inner = f"lsi{self.tag}"
            _ip("link", "add", link, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", namespace)
            _ip("-n", namespace, "link", "set", inner, "name", "eth0")
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("link", "set", link, "master", self.bridge)
            _ip("link", "set", link, "up")
        self.workdir = Path(tempfile.mkdtemp(prefix=f"lockstep-cluster-{self.tag}-"))
        self.agent = self.workdir / "rsh-agent"
        # A host is reached by its name or its address, as over ssh.
        cases = "\n".join(
            f"  {host}|{address}) ns={ns} name={host} ;;"
            for host, address, ns in zip(self.hostnames, self.addresses, self.namespaces)
        )
        # Like ssh: the remaining arguments form one command line for a shell on the host.
        self.agent.write_text(
            "#!/bin/sh\n# rsh agent for Open MPI: HOST COMMAND... runs COMMAND on a pretend host\n"
            'host=$1; shift\ncase "$host" in\n'
            + cases
            + '\n  *) echo "pretend cluster: unknown host $host" >&2; exit 255 ;;\nesac\n'
            'exec ip netns exec "$ns" unshare --uts sh -c "hostname $name && $*"\n'
        )
        self.agent.chmod(0o755)
        self.hostfile = self.workdir / "hostfile"
        self.hostfile.write_text("".join(f"{h} slots={s}\n" for h, s in zip(self.hostnames, self.slots)))

    # --- running things on hosts ----------------------------------------------
    def on_host(self, index, command):
        """The argv that runs `command` (a list) on pretend host `index`."""
        script = f"hostname {self.hostnames[index]} && exec {shlex.join(command)}"
        return ["ip", "netns", "exec", self.namespaces[index], "unshare", "--uts", "sh", "-c", script]

    def agent_args(self):
        """How mpirun reaches the pretend hosts (instead of ssh): ORTE's rsh agent
        settings (Open MPI 4) or PRRTE's ssh agent ones (Open MPI 5)."""
        mpirun = mpi_harness.mpirun()
        plm = "plm_ssh" if mpi_launcher.is_prrte(mpirun) else "plm_rsh"
        return mpi_launcher.setting_args(mpirun, {f"{plm}_agent": str(self.agent), f"{plm}_no_tree_spawn": "1"})

    def mca_args(self):
        """What Open MPI needs to treat the namespaces as hosts and stay on the subnet."""
        mpirun = mpi_harness.mpirun()
        shared_memory = "sm" if mpi_launcher.is_prrte(mpirun) else "vader"
        settings = {
            "oob_tcp_if_include": SUBNET,
            "btl_tcp_if_include": SUBNET,
            "btl": f"tcp,self,{shared_memory}",
            "mpi_yield_when_idle": "1",
        }
        return self.agent_args() + mpi_launcher.setting_args(mpirun, settings)

    def mpirun_command(self, program, num_ranks=None, extra=()):
        """mpirun on the first host, ranks filling the hostfile's slots in order."""
        num_ranks = num_ranks or sum(self.slots)
        command = [
            mpi_harness.mpirun(),
            "--allow-run-as-root",
            "--bind-to",
            "none",
            "--hostfile",
            str(self.hostfile),
            "-np",
            str(num_ranks),
            *self.mca_args(),
            *extra,
            *program,
        ]
        return self.on_host(0, command)

    def mpirun(self, program, num_ranks=None, timeout=120, env=None, extra=()):
        """Runs `program` under mpirun; an mpi_harness.MpiRun, never raises on failure."""
        return run_command(self.mpirun_command(program, num_ranks, extra), timeout, env)

    def run_script(self, script, num_ranks=None, timeout=120, env=None, args=()):
        """tests/python/scripts/<script> on the cluster, as mpi_harness.run_ranks does locally."""
        program = [sys.executable, str(mpi_harness.SCRIPTS_DIR / script), *map(str, args)]
        return self.mpirun(program, num_ranks, timeout, env)

    def kill_processes(self):
        """Kills whatever still runs on any pretend host (a test that ended a job early)."""
        for namespace in self.namespaces:
            _kill_namespace_processes(namespace)

    def set_link(self, index, up):
        """Cuts (or restores) host `index`'s only link to the others."""
        _ip("link", "set", self.links[index], "up" if up else "down")


def run_command(command, timeout, env=None):
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=mpi_harness.child_environment(env),
        cwd=mpi_harness.REPO_ROOT,
        start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        stdout, stderr = mpi_harness._stop(process)
    return mpi_harness.MpiRun(command, process.returncode, stdout, stderr, time.monotonic() - started, timed_out)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Run a command under mpirun on a pretend cluster of network namespaces (root only)."
    )
    parser.add_argument("--slots", default="2,2,1", help="slots per pretend host (default 2,2,1)")
    parser.add_argument("-np", type=int, help="ranks (default: all slots)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="program and arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the program to run")
    reason = unavailable_reason()
    if reason:
        sys.exit(reason)
    with PretendCluster([int(s) for s in args.slots.split(",")]) as cluster:
        run = cluster.mpirun(command, args.np, timeout=args.timeout)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    return 124 if run.timed_out else run.returncode


if __name__ == "__main__":
    sys.exit(main())
