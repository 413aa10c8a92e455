"""Faults end with a clear error on every surviving rank, within a bounded time, and
leave no shared-memory segment behind (tests/python/scripts/faults.py)."""

import os
import re

import pytest
from mpi_harness import mpi_info, run_ranks

KINDS = ["allreduce", "grouped_allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "barrier"]
# Generous for a loaded 2-core machine; a job ends in 2-5 s here.
JOB_LIMIT_SECONDS = 60


def shm_files(run):
    """Every shared-memory file some rank reported mapping."""
    return set(re.findall(r"^rank \d+: shm file: (\S+)$", run.stdout, re.MULTILINE))


def assert_ended_with_error(run, num_ranks, mpirun_message):
    assert not run.timed_out, f"the job hung\n{run.describe()}"
    assert run.returncode != 0, f"mpirun reported success\n{run.describe()}"
    assert run.elapsed < JOB_LIMIT_SECONDS, run.describe()
    assert "UNEXPECTED" not in run.stdout, run.describe()
    for rank in range(num_ranks):
        assert re.search(rf"rank {rank}: first \w+ done", run.stdout), (
            f"rank {rank} failed before the fault\n{run.describe()}"
        )
    # Open MPI 4's mpirun and 5's prterun word and wrap this line differently.
    said = " ".join((run.stdout + run.stderr).split())
    assert re.search(mpirun_message, said), f"no {mpirun_message!r}\n{run.describe()}"
    assert_no_leaked_shm(run)


def assert_no_leaked_shm(run):
    files = shm_files(run)
    assert any(f.startswith("/dev/shm/") for f in files), f"no shared memory reported\n{run.describe()}"
    left = sorted(f for f in files if os.path.exists(f))
    assert not left, f"shared-memory files left behind: {left}\n{run.describe()}"


@pytest.mark.parametrize("kind", KINDS)
def test_rank_killed_mid_collective_ends_the_job(kind):
    # 3 ranks: the large allreduces then run through the shared-memory window.
    run = run_ranks("faults.py", 3, timeout=JOB_LIMIT_SECONDS + 30, args=["kill", kind])
    assert_ended_with_error(run, 3, r"process rank 1 with PID \d+ on node \S+ exited on signal 9 \(Killed\)")


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "broadcast", "barrier"])
def test_rank_lost_under_ulfm_ends_every_survivor_and_is_named(kind):
    """Open MPI 5 under `mpirun --with-ft ulfm` (what lockstep-run uses for elastic
    jobs) keeps the survivors up: each one's calls fail with HorovodInternalError, and
    the rank that saw the loss names the lost rank and its host, which the elastic
    supervisor needs to drop that host. A survivor that only saw the revocation may
    not know which rank it was: ULFM tells each process of a failure separately.
    Shared-memory allreduce is off: its window waits for a dead peer until the
    collective watchdog ends the job (what follows a loss there is issue 43's)."""
    info = mpi_info()
    if not (info["built_with_ulfm"] and info["library_has_ulfm"]):
        pytest.skip(f"{info['built_version']} has no ULFM")
    run = run_ranks(
        "faults.py",
        3,
        timeout=JOB_LIMIT_SECONDS + 30,
        args=["lost", kind],
        mpirun_args=["--with-ft", "ulfm"],
        env={"LOCKSTEP_SHM_ALLREDUCE": "0"},
    )
    assert not run.timed_out, f"the job hung\n{run.describe()}"
    assert run.elapsed < JOB_LIMIT_SECONDS, run.describe()
    assert "UNEXPECTED" not in run.stdout, run.describe()
    reports = re.findall(r"^rank (\d+): lost: (.*)$", run.stdout, re.MULTILINE)
    assert sorted(int(rank) for rank, _ in reports) == [0, 2], f"a survivor did not fail\n{run.describe()}"
    named = [
        text for _, text in reports if re.search(r"rank 1 on \S+ was lost \(MPI reports the process failed\)", text)
    ]
    assert named, f"no survivor named rank 1\n{run.describe()}"


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "broadcast"])
def test_survivors_of_two_lost_ranks_go_on_in_process_under_ulfm(kind):
    """Elastic training's in-process recovery at the core: 4 ranks, one killed amid
    collectives (allreduce goes through the shared-memory window, whose wait must
    notice the dead peer), then another killed right before an agreement. Each time
    every survivor's agreement says a process failed, and they go on with fewer ranks
    and right results (tests/python/scripts/ulfm_recovery.py)."""
    info = mpi_info()
    if not (info["built_with_ulfm"] and info["library_has_ulfm"]):
        pytest.skip(f"{info['built_version']} has no ULFM")
    run = run_ranks(
        "ulfm_recovery.py", 4, timeout=JOB_LIMIT_SECONDS + 30, args=[kind], mpirun_args=["--with-ft", "ulfm"]
    )
    assert not run.timed_out, f"the job hung\n{run.describe()}"
    assert run.elapsed < JOB_LIMIT_SECONDS, run.describe()
    assert "UNEXPECTED" not in run.stdout, run.describe()
    for start_rank, sizes in ((0, (3, 2)), (2, (3,)), (3, (3, 2))):
        for size in sizes:
            assert re.search(rf"^rank {start_rank}: recovered to \d/{size}$", run.stdout, re.MULTILINE), (
                f"rank {start_rank} did not recover to {size} ranks\n{run.describe()}"
            )
    done = sorted(re.findall(r"^rank (\d): done$", run.stdout, re.MULTILINE))
    assert done == ["0", "3"], run.describe()


def test_rank_killed_mid_allreduce_at_two_ranks():
    run = run_ranks("faults.py", 2, timeout=JOB_LIMIT_SECONDS + 30, args=["kill", "allreduce"])
    assert_ended_with_error(run, 2, r"exited on signal 9 \(Killed\)")


def test_rank_frozen_inside_shared_memory_allreduces_is_named():
    # The ranks wait for each other on the window's counters, not in MPI: the
    # collective watchdog (or, between collectives, negotiation) must still end the job.
    run = run_ranks(
        "faults.py", 3, timeout=JOB_LIMIT_SECONDS + 30, args=["freeze"], env={"LOCKSTEP_PEER_TIMEOUT_SECONDS": "4"}
    )
    assert not run.timed_out, f"the job hung\n{run.describe()}"
    assert run.returncode != 0 and run.elapsed < JOB_LIMIT_SECONDS, run.describe()
    assert "UNEXPECTED" not in run.stdout, run.describe()
    assert re.search(r"rank 1 on \S+ did not respond", run.stdout + run.stderr), run.describe()


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_signal_to_one_rank_ends_the_job(num_ranks, signal_name):
    run = run_ranks("faults.py", num_ranks, timeout=JOB_LIMIT_SECONDS + 30, args=["signal", signal_name])
    number = {"SIGINT": 2, "SIGTERM": 15}[signal_name]
    assert_ended_with_error(run, num_ranks, f"exited on signal {number}")
    if signal_name == "SIGINT":
        # Rank 1 raises KeyboardInterrupt, exits, and its exit shuts lockstep down:
        # every other rank's next collective fails with a message saying so.
        assert "KeyboardInterrupt" in run.stderr, run.describe()
        for rank in set(range(num_ranks)) - {1}:
            assert re.search(rf"rank {rank}: STOPPED WITH ERROR .*has been shut down", run.stdout), (
                f"rank {rank} got no clear error\n{run.describe()}"
            )


# What each in-process check prints on every rank, besides its report.
IN_PROCESS_LINES = {
    "failing_callbacks": (),
    "huge_allgather": ("huge allgather",),
    "forked_child": ("child error",),
    "shutdown_from_thread": ("pending handles failed", "allreduces completed exactly"),
}


@pytest.mark.rank_checks("faults.py")
def test_shutdown_from_thread_fork_huge_allgather_and_failing_callbacks(num_ranks, rank_check):
    run = rank_check.run(num_ranks, timeout=120, args=["in_process"])
    for rank in range(num_ranks):
        for what in IN_PROCESS_LINES[rank_check.name]:
            assert re.search(rf"rank {rank}: .*{what}", run.stdout), (
                f"rank {rank} did not report {what!r}\n{run.describe()}"
            )
    assert_no_leaked_shm(run)


def test_lockstep_opens_no_listening_socket(num_ranks):
    # Open MPI's TCP transport listens on every interface by default; with only its
    # shared-memory transports, whatever still listens would be lockstep's.
    run = run_ranks("listening_sockets.py", num_ranks, timeout=60, env={"OMPI_MCA_btl": "self,vader"})
    run.assert_all_ranks_passed(num_ranks)
    for rank in range(num_ranks):
        assert f"rank {rank}: listening sockets: []" in run.stdout, run.describe()


@pytest.mark.parametrize("framework", ["tensorflow", "jax", "keras-jax"])
def test_rank_frozen_while_others_run_a_compiled_function_is_named(framework):
    # The error reaches the user through TensorFlow's kernel status or XLA's FFI
    # error, from a call that was inside the compiled function when rank 2 froze; in
    # fit() on the JAX backend, through BroadcastGlobalVariablesCallback's check.
    run = run_ranks(
        "frozen_peer_compiled.py",
        3,
        timeout=JOB_LIMIT_SECONDS + 30,
        args=[framework],
        env={"LOCKSTEP_PEER_TIMEOUT_SECONDS": "4"},
    )
    assert not run.timed_out, f"the job hung\n{run.describe()}"
    assert run.returncode != 0 and run.elapsed < JOB_LIMIT_SECONDS, run.describe()
    assert "UNEXPECTED" not in run.stdout, run.describe()
    for rank in (0, 1):
        assert re.search(rf"rank {rank}: RAISED .*rank 2 on \S+ did not respond within 4 s", run.stdout), (
            f"rank {rank} did not name the frozen rank\n{run.describe()}"
        )
