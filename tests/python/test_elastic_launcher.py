"""lockstep-run's elastic supervisor on this machine alone: its flags, the discovery
script's output, blacklisting with cool-down, waiting for --min-np slots, and a job
that grows when the discovery script reports more slots (signal path, no namespaces)."""

import re
import subprocess
import sys

import mpi_harness
import pytest

from lockstep.launcher import cli as launcher
from lockstep.launcher import host_discovery

RUN_PY = mpi_harness.REPO_ROOT / "python" / "lockstep" / "launcher" / "cli.py"
SCRIPT = mpi_harness.SCRIPTS_DIR / "elastic_torch_train.py"


def launch(args, timeout=120, env=None):
    return subprocess.run(
        [sys.executable, str(RUN_PY), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=mpi_harness.child_environment(env),
    )


def test_discovery_output_is_parsed_or_refused_with_the_line():
    assert host_discovery.parse_discovery_output("a:2\n\nb\nc:1\n", "s") == {"a": 2, "b": 1, "c": 1}
    for bad in ("a:0", "a:x", ":2"):
        with pytest.raises(host_discovery.DiscoveryError, match=re.escape(repr(bad))):
            host_discovery.parse_discovery_output(bad + "\n", "s")


def test_blacklist_is_permanent_by_default_and_cools_down_with_a_range():
    forever = host_discovery.Blacklist()
    forever.add("a")
    assert forever.contains("a") and not forever.contains("b")
    now = [0.0]
    cooling = host_discovery.Blacklist((10, 100), clock=lambda: now[0], rng=lambda: 0.0)
    assert [cooling.add("a") for _ in range(5)] == [10, 20, 40, 80, 100]  # doubling, capped
    now[0] = 99.0
    assert cooling.contains("a")
    now[0] = 100.0
    assert not cooling.contains("a") and cooling.hosts() == []


def test_assignment_keeps_host_order_and_caps_at_max_np():
    manager = host_discovery.HostManager(lambda: {"b": 2, "a": 2}, host_discovery.Blacklist())
    manager.refresh()
    manager._discover = lambda: {"c": 1, "a": 2, "b": 2}
    manager.refresh()
    assert manager.available() == [("b", 2), ("a", 2), ("c", 1)]  # old hosts keep their ranks
    assert host_discovery.assign(manager.available(), 3) == [("b", 2), ("a", 1)]
    manager.blacklist.add("b")
    assert host_discovery.assign(manager.available(), None) == [("a", 2), ("c", 1)]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--min-np", "2", "-np", "2", "x"], "need --host-discovery-script"),
        (["--host-discovery-script", "d", "-H", "a:1", "x"], "drop -H/--hostfile"),
        (
            ["--host-discovery-script", "d", "--min-np", "3", "--max-np", "2", "x"],
            "--min-np 3 is larger than --max-np 2",
        ),
        (["--host-discovery-script", "d", "--reset-limit", "-1", "x"], "--reset-limit must be >= 0"),
        (["--host-discovery-script", "d", "--blacklist-cooldown-range", "5", "1", "x"], "0 <= MIN <= MAX"),
    ],
)
def test_bad_elastic_flags_are_refused(argv, message):
    with pytest.raises(launcher.LaunchError, match=re.escape(message)):
        launcher.validate(launcher.parse_args(argv), {})


def test_too_few_slots_waits_for_the_timeout_then_names_the_missing_slots():
    run = launch(
        [
            "-np",
            "3",
            "--min-np",
            "2",
            "--elastic-timeout",
            "2",
            "--host-discovery-script",
            "echo localhost:1",
            sys.executable,
            "-c",
            "pass",
        ],
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert (
        "timed out after 2 s (--elastic-timeout) waiting for 3 slots (-np/--min-np): 2 missing; available: localhost:1"
    ) in run.stderr, run.stderr


def test_failing_discovery_script_is_reported():
    run = launch(["-np", "1", "--host-discovery-script", "echo oops >&2; exit 3", sys.executable, "-c", "pass"])
    assert run.returncode == 1 and "failed with exit status 3: oops" in run.stderr, run.stderr


def test_job_grows_when_discovery_reports_more_slots(tmp_path, built_extension):
    # localhost:2 becomes localhost:3 once training runs: the supervisor signals mpirun,
    # the ranks stop together at their next commit, and a 3-rank job finishes the epochs.
    # The first job's ranks wait before their second commit until the signal has come
    # (scripts/elastic_hold.py), so training cannot end before the job grows.
    started = tmp_path / "started"  # rank 0 makes it at its first step
    grow = f"[ -e {started} ] && echo localhost:3 || echo localhost:2"
    run = launch(
        ["-np", "2", "--host-discovery-script", grow, "--mpi-args=--oversubscribe", sys.executable, str(SCRIPT)],
        timeout=240,
        env={
            "LOCKSTEP_ELASTIC_COMMIT_DIR": str(tmp_path / "commits"),
            "LOCKSTEP_TEST_HOLD_AT": "1",
            "LOCKSTEP_TEST_STARTED_FILE": str(started),
        },
    )
    assert run.returncode == 0, run.stdout + run.stderr
    sizes = re.findall(r"\[train\] start size (\d+) commits (\d+)", run.stdout)
    assert [size for size, _ in sizes] == ["2", "3"] and int(sizes[1][1]) >= 1, run.stdout + run.stderr
    assert "rank 2 host" in run.stdout, run.stdout
    assert not any((tmp_path / "commits").rglob("commit-*")), "commits left behind after the job finished"


def test_job_output_names_the_lost_hosts():
    from lockstep.launcher import elastic_supervisor

    lines = [
        "[lockstep-elastic] ready rank 0",
        "[lockstep-elastic] rank 4 exits (76): peer lost: rank 0 on node1 did not respond within 4 s "
        "(LOCKSTEP_PEER_TIMEOUT_SECONDS) (rank 0 coordinates negotiation): frozen, ...",
        "[lockstep-elastic] rank 1 exits (76): peer lost: ranks 2, 3 on node2; rank 5 on node4 did not respond "
        "within 4 s (LOCKSTEP_PEER_TIMEOUT_SECONDS), as rank 0 found: frozen, ...",
    ]
    script = "; ".join(f"echo '{line}'" for line in lines)
    script += "; echo 'mpirun noticed that process rank 6 with PID 0 on node node3 exited on signal 9 (Killed).' >&2"
    watcher = elastic_supervisor.JobWatcher(["sh", "-c", script + "; exit 76"], None)
    outcome = watcher.finish()
    assert outcome.returncode == 76 and outcome.peer_lost and not outcome.hosts_updated
    # Rank 0's verdict wins over a rank that could only blame rank 0.
    assert outcome.blamed == {"node2", "node3", "node4"}
    assert watcher.ready == {0}


def test_a_watchdog_abort_names_the_lost_hosts_and_starts_the_end_grace():
    """Survivors of a rank lost inside a data collective end the job with MPI_Abort
    and report no exit; mpirun may then wait for good on a host it cannot reach."""
    from lockstep.launcher import elastic_supervisor

    prefix = "error: a collective has waited 7 s for other ranks (LOCKSTEP_PEER_TIMEOUT_SECONDS is 4 s): "
    lines = [
        f"[lockstep rank 4] {prefix}rank 0 on node1 did not respond (rank 0 coordinates): frozen, ... Ending the "
        "job with MPI_Abort.",
        f"[lockstep rank 0] {prefix}rank 4 on node3 did not respond: frozen, ... Ending the job with MPI_Abort.",
        f"[lockstep rank 1] {prefix}rank 4 on node3 did not respond, as rank 0 found: frozen, ... Ending the job "
        "with MPI_Abort.",
    ]
    script = "; ".join(f"echo '{line}' >&2" for line in lines)
    watcher = elastic_supervisor.JobWatcher(["sh", "-c", script + "; exit 1"], None)
    outcome = watcher.finish()
    assert outcome.peer_lost and outcome.blamed == {"node3"}  # rank 0's verdict, not rank 4's guess
    assert watcher.first_exit_report is not None

    unnamed = f"[lockstep rank 2] {prefix}every rank answered rank 0, so some rank is stuck inside it. Ending the job "
    watcher = elastic_supervisor.JobWatcher(["sh", "-c", f"echo '{unnamed}with MPI_Abort.'; exit 1"], None)
    outcome = watcher.finish()
    assert outcome.peer_lost and outcome.blamed == set() and watcher.first_exit_report is not None


def test_mpi_reported_failures_blame_their_hosts_unless_the_rank_aborted_itself():
    """Under ULFM MPI tells the survivors which process failed. A rank whose collective
    watchdog called MPI_Abort is reported failed too (seen in a clean-clone CI run,
    where node1 was blacklisted for rank 0's abort): its host is not to blame."""
    from lockstep.launcher import elastic_supervisor

    watchdog = (
        "[lockstep rank 0] error: a collective has waited 4 s for other ranks (LOCKSTEP_PEER_TIMEOUT_SECONDS is "
        "4 s): rank 4 on node3 did not respond: frozen, ... Ending the job with MPI_Abort."
    )
    lost = "[lockstep-elastic] rank {} exits (76): peer lost: MPI_Allreduce: {} (MPI reports the process failed)"
    aborted = [watchdog, lost.format(3, "rank 0 on node1 was lost")]
    killed = [lost.format(1, "rank 2 on node2; ranks 3, 4 on node3 were lost")]
    for lines, blamed in ((aborted, {"node3"}), (killed, {"node2", "node3"})):
        script = "; ".join(f"echo '{line}'" for line in lines)
        outcome = elastic_supervisor.JobWatcher(["sh", "-c", script + "; exit 76"], None).finish()
        assert outcome.peer_lost and outcome.blamed == blamed, lines


def test_recoveries_in_process_blacklist_the_lost_hosts_and_count_as_resets():
    """Under ULFM the survivors go on in the same job and rank 0 reports their hosts:
    the hosts that lost ranks are blacklisted, the job's hosts shrink (so discovery's
    unchanged list stops no job), and each recovery counts against --reset-limit."""
    import argparse

    from lockstep.launcher import elastic_supervisor

    report = "[lockstep-elastic] recovered in process: 3 ranks on node1:2,node3:1 in 0.02 s, back at commit 2"
    watcher = elastic_supervisor.JobWatcher(["sh", "-c", f"echo '{report}'"], None)
    watcher.finish()
    assert watcher.recoveries == [[("node1", 2), ("node3", 1)]]

    args = argparse.Namespace(
        blacklist_cooldown_range=None,
        host_discovery_script="true",
        min_np=2,
        num_proc=None,
        max_np=None,
        elastic_timeout=10,
        reset_limit=1,
    )
    logged = []
    supervisor = elastic_supervisor.Supervisor(args, {}, None, log=logged.append)
    assignment = [("node1", 2), ("node2", 2), ("node3", 1)]
    assignment, num_proc = supervisor.recovered(assignment, watcher.recoveries[0])
    assert (assignment, num_proc) == ([("node1", 2), ("node3", 1)], 3)
    assert logged == ["blacklisting node2"] and supervisor.hosts.blacklist.hosts() == ["node2"]
    with pytest.raises(elastic_supervisor.ElasticError, match="reset 1 times .* exceeding --reset-limit 1"):
        supervisor.recovered(assignment, [("node1", 2)])


def test_reports_of_two_ranks_on_one_line_both_count():
    """mpirun forwards output in pieces: a rank's report can land mid-line after
    another's (seen in a clean-clone CI run, where the job then never grew)."""
    from lockstep.launcher import elastic_supervisor

    script = "printf '[lockstep-elastic] ready rank 0[lockstep-elastic] ready rank 1\\n\\n'"
    script += "; echo '[lockstep-elastic] ready rank 3'; echo 'x [lockstep-elastic] training finished'"
    watcher = elastic_supervisor.JobWatcher(["sh", "-c", script], None)
    outcome = watcher.finish()
    assert watcher.ready == {0, 1, 3}
    assert outcome.finished and outcome.returncode == 0


def test_elastic_script_runs_under_plain_mpirun(tmp_path, built_extension):
    # Without the supervisor, hvd.elastic.run syncs and trains: commits stay in memory.
    run = mpi_harness.run_ranks("elastic_torch_train.py", 2, timeout=240, env={"LOCKSTEP_TEST_STEP_SECONDS": "0"})
    assert run.returncode == 0, run.describe()
    assert "[result]" in run.stdout and "[lockstep-elastic]" not in run.stdout, run.describe()
