"""`hvd.elastic.run`: the loop around the user's training function.

Where the MPI lets the survivors of a lost process run on (ULFM: Open MPI 5 as
installed, jobs started by lockstep-run's elastic supervisor with `--with-ft ulfm`),
recovery stays in the process, as in Horovod: on HorovodInternalError every survivor
agrees that a process failed, lockstep shrinks to the survivors, the state returns to
its last commit (in memory), reset callbacks run, and `func` is called again. Every
commit agrees first that no process failed, since under ULFM a collective that
overlaps a failure can return a wrong result on some ranks.

Otherwise, and for a change of hosts or a peer that froze, recovery spans processes:
the worker finishes writing its last commit and exits with a code that tells the
supervisor why; the supervisor starts a new job on the hosts that are healthy now,
and there `run` first agrees with the other ranks on the newest commit any host
holds, loads it on one holder and syncs it to everyone (Horovod's restore-then-sync,
across the restart). Outside such a job, `run` syncs, calls the function, and lets
errors propagate.
"""

import functools
import os
import socket
import sys
import time

from lockstep.common import basics
from lockstep.common.elastic import environment, notification
from lockstep.common.elastic.errors import HostsUpdatedInterrupt
from lockstep.common.elastic.store import CommitStore
from lockstep.common.exceptions import AbortedError, LockstepError
from lockstep.launcher.elastic_protocol import EXIT_HOSTS_UPDATED, EXIT_PEER_LOST, RECOVERED_REPORT


def run_fn(func, allgather_object):
    """Wrap `func(state, *args, **kwargs)`; `allgather_object` is the frontend's."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        notification.install()
        if not environment.supervised():
            state.sync()
            return func(state, *args, **kwargs)
        store = CommitStore(environment.commit_root(), environment.job_id())
        in_process = basics.can_recover_in_process() and environment.in_process_recovery_wanted()
        state._agree_before_commit = in_process
        resumed = False
        while True:
            try:
                if not resumed:
                    _resume(state, store, allgather_object)
                    resumed = True
                state.sync()
                # Asked now: `func` may call shutdown() itself, after which the queries raise.
                rank, local_rank = basics.rank(), basics.local_rank()
                result = func(state, *args, **kwargs)
                break
            except HostsUpdatedInterrupt:
                # Every rank is alive: wait until all have their commit on file, since the
                # first to exit ends the job.
                _leave(
                    store,
                    EXIT_HOSTS_UPDATED,
                    f"hosts updated at commit {state._commit_number}",
                    lambda: allgather_object(None),
                )
            except Exception as error:
                if not lost_peer(error):
                    raise
                if not (in_process and _recover(state, store, error, allgather_object)):
                    _leave(store, EXIT_PEER_LOST, f"peer lost: {_one_line(error)}")
        _finish(store, rank, local_rank)
        return result

    return wrapper


def _recover(state, store, error, allgather_object):
    """Go on without the lost processes, in this process (Horovod's elastic reset):
    agree that a process failed, shrink the job to the survivors, return to the last
    commit and run the reset callbacks. False where the survivors cannot go on here:
    no process failed (a peer froze or was cut off: the job is restarted without it),
    or fewer than --min-np ranks are left."""
    started = time.monotonic()
    try:
        # One agreement per commit interval on every rank (state._agree): skipped by a
        # rank whose commit already held it and found the failure. A peer that went
        # silent is no failed process to MPI: agreeing would wait for it.
        agreed, state._failure_agreed = state._failure_agreed, False
        if not agreed and not (_process_failure(error) and not basics.every_process_alive()):
            return False
        basics.recover_with_survivors()
    except LockstepError:
        return False
    if basics.size() < environment.min_np():
        return False
    state.restore()
    state._sync_root = 0
    state._store = store if basics.local_rank() == 0 else None
    hosts = allgather_object(os.environ.get("HOROVOD_HOSTNAME") or socket.gethostname())
    if basics.rank() == 0:
        counts = ",".join(f"{host}:{hosts.count(host)}" for host in dict.fromkeys(hosts))
        environment.report(
            f"{RECOVERED_REPORT}{basics.size()} ranks on {counts} in {time.monotonic() - started:.2f} s, "
            f"back at commit {state._commit_number} (after: {_one_line(error)})"
        )
    state.on_reset()
    return True


def _process_failure(error):
    """Whether `error` is a process failure that MPI reported (ULFM): the engine's
    words for it (csrc/backends/mpi/process_failures.cc)."""
    text = str(error)
    return "(MPI reports the process failed)" in text or "another rank revoked the communicator" in text


def lost_peer(error):
    """Whether `error` means a collective failed because a peer was lost: lockstep's
    AbortedError, TensorFlow's (what lockstep's TF kernels raise for it), or a plain
    HorovodInternalError raised by the user. Other errors (a bug, a mismatch between
    ranks) would fail again after a restart, so they end the job instead."""
    if isinstance(error, AbortedError) or type(error) is LockstepError:
        return True
    if type(error).__name__ == "AbortedError" and type(error).__module__.startswith("tensorflow"):
        return True
    # A collective submitted after lockstep stopped for lost peers is refused as "not
    # running" (NotInitializedError; FailedPreconditionError from a TensorFlow kernel)
    # with the stop's reason, which the engine prefixes so (engine_driving.cc).
    return isinstance(error, Exception) and LOST_PEERS_STOP in str(error)


# How the engine words a stop for lost peers (csrc/engine/engine_driving.cc).
LOST_PEERS_STOP = "lockstep stopped: "


def _one_line(error):
    """The report's reason on one line (the supervisor reads reports line by line):
    the engine's own words where a framework wrapped them in more (TensorFlow's
    "Graph execution error:" and a traceback), else the whole message."""
    text = str(error)
    if LOST_PEERS_STOP in text:
        text = text[text.index(LOST_PEERS_STOP) :].splitlines()[0]
    return " ".join(text.split())


def _resume(state, store, allgather_object):
    """Load the newest commit any host holds into `state` on its lowest-ranked holder,
    which then roots the sync. One rank per host looks, since they share the folder."""
    state._store = store if basics.local_rank() == 0 else None
    newest = store.newest() if basics.local_rank() == 0 else -1
    everyone = allgather_object(newest)
    best = max(everyone)
    if best < 0:
        return
    holder = everyone.index(best)
    if basics.rank() == holder:
        state.load_snapshot(store.load(best))
    state._commit_number = best
    state._sync_root = holder
    if basics.rank() == 0:
        environment.report(
            f"resuming from commit {best} held by rank {holder} "
            f"(generation {environment.generation()}, {basics.size()} ranks)"
        )
    state.on_reset()


def _leave(store, code, reason, barrier=None):
    """Finish the commit in flight (it is what the next job resumes from), tell the
    supervisor why, and end the process with the code it expects. The process ends
    at once (os._exit): the job is over either way, and tearing down the frameworks
    and MPI took up to 10 s on a loaded machine, all of it added to the recovery."""
    try:
        store.flush()
        if barrier is not None:
            barrier()
    finally:
        environment.report(f"rank {environment.world_rank()} exits ({code}): {reason}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _finish(store, rank, local_rank):
    """Training ended: the commits are no longer needed."""
    store.flush()
    if local_rank == 0:
        store.remove()
    if rank == 0:
        environment.report("training finished")
