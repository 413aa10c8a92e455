"""Many ranks, oversubscribed on a few cores: 16, 32 and 64 ranks run the numpy
collectives with exact values and the cached path, then one rank stops answering
(SIGSTOP) and every other rank must get an AbortedError naming it within the peer
timeout (negotiation's log-depth exchange plus the probe that names the silent rank).
One job per size, kept short: together they must stay within about two minutes."""

import re

import pytest
from mpi_harness import run_ranks

TIMEOUT = 4  # LOCKSTEP_PEER_TIMEOUT_SECONDS in these jobs
# Rank 0 judges after TIMEOUT and asks the ranks for up to a second (half the grace);
# the rest is scheduling dozens of ranks on two cores.
LIMIT = TIMEOUT + 2 + 8


@pytest.mark.parametrize("num_ranks,victim", [(16, 5), (32, 31), (64, 40)])
def test_collectives_and_a_silent_rank_at_scale(num_ranks, victim):
    run = run_ranks(
        "scale_checks.py",
        num_ranks,
        timeout=240,
        args=["freeze", victim],
        env={"LOCKSTEP_PEER_TIMEOUT_SECONDS": str(TIMEOUT)},
    )
    assert not run.timed_out, run.describe()
    for rank in range(num_ranks):
        assert f"rank {rank}: ALL CHECKS PASSED" in run.stdout, run.describe()
    reports = {
        int(m.group(1)): (float(m.group(2)), m.group(3))
        # Ranks print concurrently, so two reports may share a line: each ends where the
        # next begins.
        for m in re.finditer(r"rank (\d+): named after ([\d.]+) s: (.*?)(?=rank \d+: named after|$)", run.stdout, re.M)
    }
    # The launcher's teardown may wake the frozen rank (SIGCONT) before killing it, and it
    # may then report the others gone: only the survivors' reports count.
    reports.pop(victim, None)
    assert sorted(reports) == [rank for rank in range(num_ranks) if rank != victim], run.describe()
    print(f"{num_ranks} ranks: named within {max(s for s, _ in reports.values()):.1f} s")
    for rank, (seconds, message) in reports.items():
        assert f"rank {victim} on " in message and f"did not respond within {TIMEOUT} s" in message, message
        assert seconds <= LIMIT, f"rank {rank} named it after {seconds} s\n{run.describe()}"
    assert run.returncode != 0  # the launcher ends the job, the frozen rank included
