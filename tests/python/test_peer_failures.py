"""Failures between hosts on a pretend cluster (5 ranks, 2+2+1 on 3 hosts).

A frozen host (SIGSTOP) or a cut link (veth down) must give every rank that is left
an AbortedError naming the unresponsive ranks and their host within
LOCKSTEP_PEER_TIMEOUT_SECONDS (plus rank 0's verdict time and scheduling slack), not
a hang. A rank frozen inside a data collective ends the job through the collective
watchdog; a killed rank ends the job.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pretend_cluster

TIMEOUT = 4  # LOCKSTEP_PEER_TIMEOUT_SECONDS in these jobs
# Rank 0 judges after TIMEOUT; the others would blame rank 0 after TIMEOUT + 2 s. The
# rest is scheduling on a loaded 2-core machine.
LIMIT = TIMEOUT + 2 + 8
RANKS = 5


class LiveJob:
    """An mpirun whose output is read line by line as it comes, each line timed."""

    def __init__(self, command, env):
        self.lines = []  # (arrival time, line)
        self.changed = threading.Condition()
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=pretend_cluster.mpi_harness.child_environment(env),
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            with self.changed:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.changed.notify_all()

    def wait_for(self, pattern, count, timeout):
        """The first match of `pattern` for each of `count` ranks: {rank: (time, match)}."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                found = {}
                for at, line in self.lines:  # the launcher may glue lines of different ranks
                    for match in re.finditer(pattern, line):
                        found.setdefault(int(match.group("rank")), (at, match))
                if len(found) >= count or time.monotonic() >= deadline:
                    return found
                self.changed.wait(max(0.0, min(1.0, deadline - time.monotonic())))

    def output(self):
        with self.changed:
            return "\n".join(line for _, line in self.lines)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def start_job(cluster, tmp_path, *args):
    """peer_loss.py on 5 ranks; returns the job, its go file and {rank: pid} once all are ready."""
    go_file = tmp_path / "go"
    program = [sys.executable, str(pretend_cluster.mpi_harness.SCRIPTS_DIR / "peer_loss.py"), *args]
    job = LiveJob(
        cluster.mpirun_command(program, RANKS),
        {"LOCKSTEP_PEER_TIMEOUT_SECONDS": str(TIMEOUT), "LOCKSTEP_TEST_GO_FILE": str(go_file)},
    )
    ready = job.wait_for(r"rank (?P<rank>\d+): ready pid (?P<pid>\d+)", RANKS, timeout=120)
    assert len(ready) == RANKS, job.output()
    return job, go_file, {rank: int(found[1].group("pid")) for rank, found in ready.items()}


def run_fault(cluster, tmp_path, victims, apply_fault, recover=lambda: None):
    """Starts the job, applies the fault to the victims once all ranks idle, and returns
    {rank: (seconds after the fault, message)} for the ranks that report it."""
    job, go_file, pids = start_job(cluster, tmp_path)
    try:
        apply_fault({rank: pids[rank] for rank in victims})
        fault_at = time.monotonic()
        go_file.touch()
        survivors = [rank for rank in range(RANKS) if rank not in victims]
        reports = job.wait_for(
            r"rank (?P<rank>\d+): aborted after [\d.]+ s: (?P<message>.*?restart the job)",
            len(survivors),
            timeout=LIMIT + 10,
        )
        assert sorted(reports) == survivors, job.output()
        recover()
        # With the survivors gone, the launcher ends the job (frozen ranks included).
        job.process.wait(timeout=60)
        assert job.process.returncode != 0, job.output()
        return {rank: (at - fault_at, match.group("message")) for rank, (at, match) in reports.items()}, job
    finally:
        job.stop()
        cluster.kill_processes()


def assert_reported(reports, job, expected):
    for rank, (seconds, message) in reports.items():
        assert expected in message and "LOCKSTEP_PEER_TIMEOUT_SECONDS" in message, job.output()
        assert seconds <= LIMIT, f"rank {rank} reported after {seconds:.1f} s\n{job.output()}"


def freeze(pids):
    for pid in pids.values():
        os.kill(pid, signal.SIGSTOP)


def test_frozen_host_is_named_on_every_other_rank(cluster, tmp_path):
    reports, job = run_fault(cluster, tmp_path, [2, 3], freeze)
    assert_reported(reports, job, "ranks 2, 3 on node2 did not respond within 4 s")


def test_cut_link_is_named_on_every_other_rank(cluster, tmp_path):
    try:
        # node3's ranks cannot even reach the launcher while cut off, so the link comes
        # back once the others have reported, for the launcher to end the job.
        reports, job = run_fault(
            cluster, tmp_path, [4], lambda pids: cluster.set_link(2, False), recover=lambda: cluster.set_link(2, True)
        )
    finally:
        cluster.set_link(2, True)
    assert_reported(reports, job, "rank 4 on node3 did not respond within 4 s")


def test_frozen_coordinator_is_named(cluster, tmp_path):
    reports, job = run_fault(cluster, tmp_path, [0], freeze)
    assert_reported(
        reports, job, "rank 0 on node1 did not respond within 4 s (LOCKSTEP_PEER_TIMEOUT_SECONDS) (rank 0 coordinates"
    )


def freeze_rank_2_mid_run(cluster, tmp_path, mode):
    """Runs peer_loss.py `mode`, freezes rank 2 1.5 s in, and returns the output once
    the job ended, after checking that it failed within the limit and named rank 2."""
    job, go_file, pids = start_job(cluster, tmp_path, mode)
    try:
        go_file.touch()
        time.sleep(1.5)
        os.kill(pids[2], signal.SIGSTOP)
        frozen_at = time.monotonic()
        job.process.wait(timeout=LIMIT + 30)
        ended_after = time.monotonic() - frozen_at
    finally:
        job.stop()
        cluster.kill_processes()
    output = job.output()
    assert job.process.returncode != 0, output
    assert_watchdog_or_negotiation_named(output, "rank 2 on node2")
    assert ended_after <= LIMIT + 10, f"the job ended {ended_after:.1f} s after the freeze\n{output}"
    return output


def test_rank_frozen_inside_data_collectives_ends_the_job(cluster, tmp_path):
    # Frozen while every rank runs 4 MiB allreduces: the others are then most likely
    # inside a blocking data collective, which the watchdog ends with MPI_Abort; if
    # they were negotiating, they name the rank instead. Either way: no hang.
    freeze_rank_2_mid_run(cluster, tmp_path, "large")


def test_rank_frozen_while_rank_0_still_sends_to_it_is_named_not_rank_0(cluster, tmp_path):
    # Broadcasts from rank 0: ranks that have their data go on negotiating while rank 0
    # may still be sending to the frozen rank. They wait for rank 0, which is alive:
    # rank 0 asks who is there before they would blame it, and everyone names rank 2.
    output = freeze_rank_2_mid_run(cluster, tmp_path, "broadcast")
    # The frozen rank, woken as mpirun ends the job, may rightly find rank 0 gone.
    others = [line for line in output.splitlines() if not re.match(r"(\[lockstep )?rank 2[:\]]", line)]
    assert not [line for line in others if "rank 0 on node1 did not respond" in line], output


def assert_watchdog_or_negotiation_named(output, who):
    """Inside a data collective, the watchdogs name the silent ranks before MPI_Abort
    (rank 0's own, or rank 0's verdict heard by the others; the first abort may end
    the rest before they speak); if the fault came while the ranks negotiated,
    negotiation names them. Whoever speaks names exactly `who`."""
    watchdog = [line for line in output.splitlines() if "a collective has waited" in line]
    if watchdog:
        for line in watchdog:
            assert f"{who} did not respond" in line and "Ending the job with MPI_Abort" in line, output
    else:
        assert f"{who} did not respond within 4 s" in output, output


def test_link_cut_inside_data_collectives_is_named(cluster, tmp_path):
    # Cut while every rank runs 4 MiB allreduces. mpirun cannot end node3's rank while
    # the link is down, so the link comes back once rank 0 has named it (an elastic
    # launcher stops mpirun itself: test_elastic_torch).
    job, go_file, _pids = start_job(cluster, tmp_path, "large")
    try:
        go_file.touch()
        time.sleep(1.5)
        cluster.set_link(2, False)
        cut_at = time.monotonic()
        named = job.wait_for(
            r"rank (?P<rank>0)(?:\] error: a collective has waited|: aborted after)",
            1,
            timeout=LIMIT + 20,
        )
        named_after = time.monotonic() - cut_at
        cluster.set_link(2, True)
        job.process.wait(timeout=60)
    finally:
        cluster.set_link(2, True)
        job.stop()
        cluster.kill_processes()
    output = job.output()
    assert named, output
    assert_watchdog_or_negotiation_named(output, "rank 4 on node3")
    assert named_after <= LIMIT + 10, f"named {named_after:.1f} s after the cut\n{output}"


def test_killed_rank_ends_the_job(cluster):
    run = cluster.run_script("rank_death.py", timeout=120)
    assert not run.timed_out and run.returncode != 0, run.describe()
    assert "rank 1: first allreduce done" in run.stdout, run.describe()
    assert "UNEXPECTED" not in run.stdout, run.describe()
