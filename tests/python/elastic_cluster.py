"""Helpers for the elastic tests on the pretend cluster: start lockstep-run's elastic
supervisor on the first host with a discovery script that reads a file, follow its
output, kill or cut off hosts, and compute the reference run."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pretend_cluster
from test_peer_failures import LiveJob

RUN_PY = pretend_cluster.mpi_harness.REPO_ROOT / "python" / "lockstep" / "launcher" / "cli.py"
SCRIPT = pretend_cluster.mpi_harness.SCRIPTS_DIR / "elastic_torch_train.py"
KERAS_SCRIPT = pretend_cluster.mpi_harness.SCRIPTS_DIR / "elastic_keras_train.py"
PEER_TIMEOUT = 4


def recovers_in_process():
    """Whether the build's MPI has ULFM: lockstep-run's elastic jobs then keep the
    survivors of a lost process running, and they go on in process."""
    info = pretend_cluster.mpi_harness.mpi_info()
    return bool(info and info["built_with_ulfm"] and info["library_has_ulfm"])


def assert_recovered(output, size):
    """The survivors went on in process where the MPI allows it, else in a new job."""
    if recovers_in_process():
        assert f"recovered in process: {size} ranks" in output and "generation 1" not in output, output
    else:
        assert f"generation 1: {size} ranks" in output, output


def hold(at, generations=1):
    """The environment that holds the job's ranks before each commit once `at` commits
    are made, in its first `generations` jobs, until ElasticRun.release() or a change of
    hosts (scripts/elastic_hold.py): the job is still training when the test acts."""
    return {"LOCKSTEP_TEST_HOLD_AT": str(at), "LOCKSTEP_TEST_HOLD_GENERATIONS": str(generations)}


class ElasticRun:
    """lockstep-run --host-discovery-script 'cat HOSTS' ... on the cluster's first host."""

    def __init__(self, cluster, tmp_path, hosts, launcher_args=(), program=None, env=None):
        self.cluster = cluster
        self.hosts_file = tmp_path / "hosts.txt"
        self.release_file = tmp_path / "release"
        self.set_hosts(hosts)
        agent = " ".join(cluster.agent_args())
        program = program or [sys.executable, str(SCRIPT)]
        command = [
            sys.executable,
            str(RUN_PY),
            "--host-discovery-script",
            f"cat {self.hosts_file}",
            "--network-interface",
            pretend_cluster.SUBNET,
            "--mpi-args",
            agent,
            *launcher_args,
            *program,
        ]
        self.job = LiveJob(
            cluster.on_host(0, command),
            {
                "LOCKSTEP_PEER_TIMEOUT_SECONDS": str(PEER_TIMEOUT),
                "LOCKSTEP_ELASTIC_COMMIT_DIR": str(tmp_path / "commits"),
                "LOCKSTEP_TEST_RELEASE_FILE": str(self.release_file),
                **(env or {}),
            },
        )

    def set_hosts(self, hosts):
        self.hosts_file.write_text("".join(f"{host}\n" for host in hosts))

    def wait_for_progress(self, size, commits, timeout=120):
        """Blocks until rank 0 trains a step with `size` ranks after `commits` commits."""
        pattern = rf"\[train\] size {size} epoch \d+ commits (?P<rank>{commits})\b"
        found = self.job.wait_for(pattern, 1, timeout)
        assert found, f"no step with {size} ranks after {commits} commits\n{self.job.output()}"

    def wait_until_held(self, ranks, timeout=60):
        """Blocks until `ranks` ranks wait at the hold (none is then inside a collective)."""
        found = self.job.wait_for(r"\[hold\] rank (?P<rank>\d+) waits", ranks, timeout)
        assert len(found) >= ranks, f"{len(found)} of {ranks} ranks reached the hold\n{self.job.output()}"

    def release(self):
        """Lets held ranks go on (see hold())."""
        self.release_file.touch()

    def finish(self, timeout=180):
        try:
            self.job.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # what the job said is what tells why
            raise AssertionError(f"lockstep-run did not end within {timeout} s\n{self.job.output()}") from None
        return self.job.process.returncode, self.job.output()

    def stop(self):
        self.job.stop()
        self.cluster.kill_processes()


def kill_ranks(cluster, host_index, script=SCRIPT):
    """SIGKILLs the training processes on one pretend host; returns how many."""
    namespace = cluster.namespaces[host_index]
    pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    killed = 0
    for pid in pids:
        try:
            if script.name in Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            pass
    return killed


def history(output):
    """[(size, commits)] of each job's start, as rank 0 printed them."""
    return [
        (int(size), int(commits)) for size, commits in re.findall(r"\[train\] start size (\d+) commits (\d+)", output)
    ]


def result(output):
    lines = re.findall(r"\[result\] (\{.*\})", output)
    assert lines, output
    return json.loads(lines[-1])


def reference(membership, program=(str(SCRIPT),)):
    """The uninterrupted run with the same membership history, in one process."""
    spec = ",".join(f"{size}@{commits}" for size, commits in membership)
    run = subprocess.run(
        [sys.executable, *program, "--reference", spec],
        capture_output=True,
        text=True,
        timeout=120,
        env=pretend_cluster.mpi_harness.child_environment({}),
    )
    assert run.returncode == 0, run.stderr
    return result(run.stdout)


def assert_matches_reference(output, expected_sizes):
    membership = history(output)
    assert [size for size, _ in membership] == expected_sizes, output
    got, want = result(output), reference(membership)
    # Every sample trained exactly as often as in the plan (padding repeats a few).
    assert got["trained"] == want["trained"], output
    assert min(got["trained"]) >= 2, output  # each sample at least once in each of the 2 epochs
    # The ranks' gradients are summed in another order than the reference's, so the
    # last bits may differ; anything lost or replayed twice would differ far more.
    np.testing.assert_allclose(got["weights"], want["weights"], rtol=1e-9, atol=1e-12)
    return membership
