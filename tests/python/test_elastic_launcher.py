"""lockstep-run's elastic supervisor on this machine alone: its flags, the discovery
script's output, blacklisting with cool-down, waiting for --min-np slots, and a job
that grows when the discovery script reports more slots (signal path, no namespaces)."""

import os
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
        (["--min-np", "2", "-np", "2", "x"], "need --host-discovery-script or fixed hosts (-H/--hostfile)"),
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
    where node1 was blacklisted for rank 0's abort), and so is any rank the abort
    killed: their hosts are not to blame."""
    from lockstep.launcher import elastic_supervisor

    watchdog = (
        "[lockstep rank 0] error: a collective has waited 4 s for other ranks (LOCKSTEP_PEER_TIMEOUT_SECONDS is "
        "4 s): rank 4 on node3 did not respond: frozen, ... Ending the job with MPI_Abort."
    )
    lost = "[lockstep-elastic] rank {} exits (76): peer lost: MPI_Allreduce: {} (MPI reports the process failed)"
    aborted = [watchdog, lost.format(3, "rank 0 on node1 was lost")]
    # Rank 1 killed by rank 0's abort before rank 3 noticed: a consequence, not a verdict.
    killed_by_the_abort = [watchdog, lost.format(3, "rank 1 on node1 was lost")]
    named_with_the_aborting_rank = [lost.format(2, "ranks 0, 1 on node1 were lost"), watchdog]
    killed = [lost.format(1, "rank 2 on node2; ranks 3, 4 on node3 were lost")]
    killed_before_an_abort = [lost.format(1, "rank 2 on node2 was lost"), watchdog]
    cases = (
        (aborted, {"node3"}),
        (killed_by_the_abort, {"node3"}),
        (named_with_the_aborting_rank, {"node3"}),
        (killed, {"node2", "node3"}),
        (killed_before_an_abort, {"node2", "node3"}),
    )
    for lines, blamed in cases:
        script = "; ".join(f"echo '{line}'" for line in lines)
        outcome = elastic_supervisor.JobWatcher(["sh", "-c", script + "; exit 76"], None).finish()
        assert outcome.peer_lost and outcome.blamed == blamed, lines
    # lockstep's own error lines on a rank whose recovery in process did not complete.
    error = "[lockstep rank 3] error: MPI_Allreduce: {} (MPI reports the process failed)"
    for lines, lost_hosts in (
        ([watchdog, error.format("rank 1 on node1 was lost")], set()),
        ([error.format("rank 2 on node2 was lost"), watchdog], {"node2"}),
    ):
        script = "; ".join(f"echo '{line}' >&2" for line in lines)
        watcher = elastic_supervisor.JobWatcher(["sh", "-c", script + "; exit 76"], None)
        watcher.finish()
        assert watcher.hosts_mpi_lost() == lost_hosts, lines


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
    assignment = supervisor.recovered(assignment, watcher.recoveries[0])
    assert assignment == [("node1", 2), ("node3", 1)]
    assert logged == ["blacklisting node2"] and supervisor.hosts.blacklist.hosts() == ["node2"]
    # A worker on node2 that raised is what the job recovered from: when the job later
    # ends after another loss, that raise is no failed worker of its own to count.
    outcome = elastic_supervisor.JobOutcome(1, peer_lost=True, raised={2: ("node2", "ValueError: a bug")})
    assert supervisor.unrecovered_raises(outcome) == {} and not supervisor.finished(outcome)
    outcome.raised[4] = ("node3", "ValueError: a bug")
    assert supervisor.unrecovered_raises(outcome) == {4: ("node3", "ValueError: a bug")}
    with pytest.raises(elastic_supervisor.ElasticError, match="reset 1 times .* exceeding --reset-limit 1"):
        supervisor.recovered(assignment, [("node1", 2)])

    # Recoveries that a job reports just before it ends count all the same, even when
    # training finished before the supervisor looked (CI: the job then ended with 0).
    lines = [
        report,
        report.replace("3 ranks on node1:2,node3:1", "2 ranks on node1:2"),
        "[lockstep-elastic] training finished",
    ]
    job = ["sh", "-c", "printf '%s\\n' " + " ".join(f"'{line}'" for line in lines)]
    supervisor = elastic_supervisor.Supervisor(args, {}, lambda *_: (job, dict(os.environ)), log=logged.append)
    with pytest.raises(elastic_supervisor.ElasticError, match="reset 1 times .* exceeding --reset-limit 1"):
        supervisor.run_generation([("node1", 2), ("node2", 2), ("node3", 1)], 0)

    # A second loss that MPI reported to lockstep but that the job did not recover from
    # (the job ended with exit status 1 first) is a lost host: node3 is blamed, and the
    # recovered node2 is not blamed again.
    lost = "[lockstep rank {}] error: lockstep stopped: rank {} on {} was lost (MPI reports the process failed)"
    lines = [lost.format(0, 2, "node2"), report, lost.format(1, 4, "node3"), lost.format(0, 4, "node3")]
    job = ["sh", "-c", "printf '%s\\n' " + " ".join(f"'{line}'" for line in lines) + "; exit 1"]
    args.reset_limit = None
    supervisor = elastic_supervisor.Supervisor(args, {}, lambda *_: (job, dict(os.environ)), log=logged.append)
    outcome = supervisor.run_generation([("node1", 2), ("node2", 2), ("node3", 1)], 0)
    assert outcome.peer_lost and outcome.blamed == {"node3"} and outcome.returncode == 1
    assert supervisor.recovered_hosts == {"node2"} and supervisor.resets == 1
    assert not supervisor.finished(outcome)


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


def supervised_run(jobs, hosts, **flags):
    """A Supervisor whose jobs are shell scripts printing what workers and mpirun print:
    `jobs[g]` is generation g's. Returns (supervisor, what it logged, each job's
    (hosts, environment)); the run's end is in supervisor.result (0 or the ElasticError)."""
    import argparse

    from lockstep.launcher import elastic_supervisor

    options = dict(blacklist_cooldown_range=None, host_discovery_script=None, min_np=1, num_proc=None)
    options.update(max_np=None, elastic_timeout=600, reset_limit=None, **flags)
    started, logged = [], []

    def build_command(assignment, num_proc, env):
        started.append((assignment, env))
        return ["sh", "-c", jobs[len(started) - 1]], None

    supervisor = elastic_supervisor.Supervisor(
        argparse.Namespace(**options), {}, build_command, log=logged.append, discover=lambda: dict(hosts)
    )
    try:
        supervisor.result = supervisor.run()
    except elastic_supervisor.ElasticError as error:
        supervisor.result = error
    return supervisor, logged, started


def report(line):
    return f"echo '[lockstep-elastic] {line}'"


def test_a_worker_that_raises_has_its_host_blacklisted_and_the_job_goes_on_without_it():
    raised = report("rank 1 on node2 raised: ValueError: a bug") + "; exit 1"
    committed = report("first commit of this job (number 1)")
    supervisor, logged, started = supervised_run(
        [f"{committed}; {raised}", report("training finished")], {"node1": 1, "node2": 1}
    )
    assert supervisor.result == 0, logged
    assert [hosts for hosts, _ in started] == [[("node1", 1), ("node2", 1)], [("node1", 1)]]
    assert "blacklisting node2" in logged and supervisor.resets == 1
    # Each job gets the run's signing key; the second must find the commit the first made.
    keys = {env["LOCKSTEP_ELASTIC_COMMIT_KEY"] for _, env in started}
    assert len(keys) == 1 and len(keys.pop()) == 64
    assert "LOCKSTEP_ELASTIC_COMMITTED" not in started[0][1] and started[1][1]["LOCKSTEP_ELASTIC_COMMITTED"] == "1"


def test_a_script_that_raises_on_every_host_ends_the_run():
    raised = [report(f"rank {rank} on node{rank + 1} raised: KeyError: x") for rank in (1, 0)]
    supervisor, logged, started = supervised_run(["; ".join(raised) + "; exit 1"], {"node1": 1, "node2": 1})
    assert isinstance(supervisor.result, Exception) and len(started) == 1, logged
    assert str(supervisor.result) == (
        "the training script raised on every host of the job (rank 0 on node1: KeyError: x); "
        "a restart would fail the same way"
    )


def test_no_commit_to_resume_from_ends_the_run_even_if_one_host_reported_it():
    raised = report("rank 2 on node2 raised: NoCommitError: an earlier job of this run committed, but ...")
    supervisor, logged, started = supervised_run([raised + "; exit 1"], {"node1": 2, "node2": 2})
    assert len(started) == 1 and "NoCommitError: an earlier job" in str(supervisor.result), logged
    from lockstep.common.elastic import runner
    from lockstep.launcher import elastic_protocol

    assert runner.NoCommitError.__name__ == elastic_protocol.NO_COMMIT_ERROR


def test_every_host_blacklisted_ends_the_run_at_once():
    # Without a cool-down range no host comes back: waiting --elastic-timeout (600 s
    # here) would only delay the end.
    import time

    killed = "echo 'mpirun noticed that process rank 0 with PID 0 on node {} exited on signal 9 (Killed).' >&2; exit 1"
    started_at = time.monotonic()
    supervisor, logged, started = supervised_run(
        [killed.format(host) for host in ("node2", "node1")], {"node1": 1, "node2": 1}
    )
    assert len(started) == 2 and [line for line in logged if "blacklisting" in line] == [
        "blacklisting node2",
        "blacklisting node1",
    ]
    assert "every host is blacklisted after failures (node1, node2)" in str(supervisor.result), supervisor.result
    assert time.monotonic() - started_at < 60


def test_nothing_is_retrained_after_training_finished():
    # The commits are removed once training finishes: a restart would start over.
    ended = report("training finished")
    ended += "; echo 'mpirun noticed that process rank 1 with PID 0 on node node2 exited on signal 9 (Killed).' >&2"
    supervisor, logged, started = supervised_run([ended + "; exit 1"], {"node1": 1, "node2": 1})
    assert len(started) == 1, logged
    assert "training finished (rank 0 said so), but the job then ended with mpirun exit status 1" in str(
        supervisor.result
    )


def test_blame_in_machine_names_blacklists_the_host_lists_name():
    # The host list names hosts by address; MPI and lockstep name the machine.
    from lockstep.launcher import elastic_supervisor

    lines = [report(f"ready rank {rank} host 10.77.0.{rank + 1} machine host{rank}") for rank in (0, 1)]
    lines.append("echo 'mpirun noticed that process rank 1 with PID 0 on node host1 exited on signal 9 (Killed).'")
    outcome = elastic_supervisor.JobWatcher(["sh", "-c", "; ".join(lines) + "; exit 1"], None).finish()
    assert outcome.peer_lost and outcome.blamed == {"10.77.0.2"}


def test_fixed_hosts_make_an_elastic_run_with_min_np():
    args = launcher.parse_args(["-H", "10.77.0.1:2,10.77.0.2:2", "--min-np", "2", "python", "train.py"])
    launcher.validate(args, {})
    assert launcher.elastic_requested(args)


def test_sigterm_or_sighup_stops_the_job_and_the_launcher(tmp_path):
    # An elastic run on fixed hosts (-H with --min-np) whose job sleeps: the signal
    # must end the job too, not leave it running without a supervisor.
    import os
    import signal
    import time

    for signum in (signal.SIGTERM, signal.SIGHUP):
        marker = f"lockstep-test-sleeper-{signum}-{os.getpid()}"
        command = [sys.executable, str(RUN_PY), "-H", "localhost:1", "--min-np", "1"]
        command += [sys.executable, "-c", f"import time; print('{marker}', flush=True); time.sleep(300)"]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=mpi_harness.child_environment({})
        )
        assert process.stdout.readline().strip() == marker  # the job runs
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 128 + signum, stderr
        assert f"stopped by {signal.Signals(signum).name}; the job was ended" in stderr, stderr
        time.sleep(0.5)
        left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, marker)]
        assert not left, f"the job outlived lockstep-run: {left}"


def _cmdline_has(pid, text):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return text.encode() in cmdline.read()
    except OSError:
        return False


def test_a_rank_that_raises_ends_the_job_instead_of_hanging(tmp_path, built_extension):
    # Its peers used to wait for its next collective, and it for them in shutdown.
    run = launch(
        ["-np", "2", "--host-discovery-script", "echo localhost:2", "--mpi-args=--oversubscribe", sys.executable]
        + [str(SCRIPT)],
        timeout=240,
        env={"LOCKSTEP_ELASTIC_COMMIT_DIR": str(tmp_path / "commits"), "LOCKSTEP_TEST_RAISE_ON_RANKS": "1"},
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "rank 1 on localhost raised: ValueError: a bug on rank 1" in run.stdout, run.stdout + run.stderr
    assert "the training script raised on every host of the job (rank 1 on localhost" in run.stderr, run.stderr


def test_a_job_after_a_commit_refuses_to_start_without_one(tmp_path, built_extension):
    # An earlier job committed (the supervisor says so), but no host here holds a commit:
    # training again from the initial state would go unnoticed.
    env = {
        "LOCKSTEP_ELASTIC_JOB_ID": "resume-test",
        "LOCKSTEP_ELASTIC_GENERATION": "1",
        "LOCKSTEP_ELASTIC_COMMITTED": "1",
        "LOCKSTEP_ELASTIC_COMMIT_KEY": "ab" * 32,
        "LOCKSTEP_ELASTIC_COMMIT_DIR": str(tmp_path / "commits"),
    }
    run = mpi_harness.run_ranks("elastic_torch_train.py", 2, timeout=240, env=env)
    assert run.returncode != 0, run.describe()
    assert "raised: NoCommitError: an earlier job of this run committed, but no host" in run.stdout, run.describe()
    assert "[train] start" not in run.stdout, run.describe()


def test_rank_0_can_vouch_for_every_ranks_readiness():
    # A script that sends other ranks' stdout to /dev/null used to keep the job from
    # ever growing: the supervisor waited for each rank's own ready line.
    from lockstep.launcher import elastic_supervisor

    script = f"{report('ready rank 0')}; {report('every rank ready (3 ranks)')}"
    watcher = elastic_supervisor.JobWatcher(["sh", "-c", script], None)
    watcher.finish()
    assert watcher.all_ready(3)
    watcher = elastic_supervisor.JobWatcher(["sh", "-c", report("ready rank 0")], None)
    watcher.finish()
    assert not watcher.all_ready(3) and watcher.all_ready(1)
