"""Holding an elastic test job at a commit point until the test has acted on it.

A test that kills a host, cuts its link or adds one while the job trains needs the
job to still be training when it acts. Sleeps in every step only made that likely (a
loaded machine once let training end before an added host's rank had started) and
cost their time in every run. Instead, the ranks wait at a commit point:

    LOCKSTEP_TEST_HOLD_AT=N            before each commit once N commits are made
    LOCKSTEP_TEST_HOLD_GENERATIONS=G   in the run's first G memberships only (default 1):
                                       jobs, and recoveries in process
    LOCKSTEP_TEST_RELEASE_FILE=PATH    until PATH exists (the test has acted)

or until this rank has seen the launcher announce a change of hosts (that commit then
stops the job), or until lockstep stopped (under ULFM a peer's death leaves this rank
running, and only its next collective reports it), at most HOLD_LIMIT_SECONDS: then
training goes on, and the test fails on what it finds instead of hanging. Without LOCKSTEP_TEST_HOLD_AT, nothing waits.
hold() says whether it held, for a script that then does what the test needs in the
middle of a collective (LOCKSTEP_TEST_LARGE_AFTER_HOLD in elastic_torch_train.py).
"""

import os
import sys
import time

HOLD_LIMIT_SECONDS = 120.0
POLL_SECONDS = 0.02
_sizes_seen = []  # the job's sizes at this process's holds, in order


def hold(commits, rank):
    """Waits here if the test asked for it (see above); `commits`: the commits made.
    A rank that waits says so first, for a test that must act while none computes.
    True if this commit was one to hold at."""
    hold_at = os.environ.get("LOCKSTEP_TEST_HOLD_AT")
    if hold_at is None:
        return False
    from lockstep.common import basics

    # Survivors that recovered in process train on with fewer ranks: a new membership.
    size = basics.size()
    if not _sizes_seen or _sizes_seen[-1] != size:
        _sizes_seen.append(size)
    if commits < int(hold_at):
        return False
    generation = int(os.environ.get("LOCKSTEP_ELASTIC_GENERATION", "0"))
    if generation + len(_sizes_seen) - 1 >= int(os.environ.get("LOCKSTEP_TEST_HOLD_GENERATIONS", "1")):
        return False
    from lockstep.common.elastic import notification

    release = os.environ.get("LOCKSTEP_TEST_RELEASE_FILE")

    def released():
        # A stopped lockstep: under ULFM the survivors of a lost peer live on (and may
        # recover in process); only their next collective reports it.
        stopped = not basics.is_initialized()
        return bool(release and os.path.exists(release)) or notification.peek_pending() or stopped

    if released():
        return True
    print(f"[hold] rank {rank} waits at commit {commits}", flush=True)
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while not released():
        if time.monotonic() >= deadline:
            print(f"[hold] nothing released the hold within {HOLD_LIMIT_SECONDS:g} s", file=sys.stderr, flush=True)
            return True
        time.sleep(POLL_SECONDS)
    return True
