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
across the restart); after the sync every host holds that commit. Any other error
(a bug) is reported and ends the process, and the supervisor blacklists its host,
as Horovod's driver does. Outside such a job, `run` syncs, calls the function, and
lets errors propagate.
"""

import functools
import os
import sys
import time
import traceback

from lockstep.common import basics
from lockstep.common.elastic import environment, notification
from lockstep.common.elastic.errors import HostsUpdatedInterrupt
from lockstep.common.elastic.store import CommitStore
from lockstep.common.exceptions import AbortedError, LockstepError
from lockstep.launcher.elastic_protocol import (
    ALL_READY_REPORT,
    EXIT_HOSTS_UPDATED,
    EXIT_PEER_LOST,
    RAISED_REPORT,
    RECOVERED_REPORT,
    RESUMED_REPORT,
)


def run_fn(func, allgather_object):
    """Wrap `func(state, *args, **kwargs)`; `allgather_object` is the frontend's."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        notification.install()
        if not environment.supervised():
            state.sync()
            return func(state, *args, **kwargs)
        try:
            return _supervised(func, state, allgather_object, args, kwargs)
        except Exception as error:
            _fail(error)

    return wrapper


def _supervised(func, state, allgather_object, args, kwargs):
    """`func` in a job of lockstep-run's elastic supervisor: resumed from the newest
    commit, recovered in process or left for a restart after a lost peer."""
    store = CommitStore(
        environment.commit_root(), environment.job_id(), environment.commit_key(), generation=environment.generation()
    )
    in_process = basics.can_recover_in_process() and environment.in_process_recovery_wanted()
    state._agree_before_commit = in_process
    resumed_from = False
    while True:
        try:
            if resumed_from is False:
                resumed_from = _resume(state, store, allgather_object)
            state.sync()
            if resumed_from:
                _spread(state, store, resumed_from)
                resumed_from = None
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
    _finish(store, rank, local_rank, lambda: allgather_object(None))
    return result


def _fail(error):
    """The training script raised (not a lost peer): a restart on the same host would
    fail alike. Tell the supervisor, which blacklists this host (ending the run if every
    host raised), and end the process at once: a normal exit would wait in lockstep's
    shutdown for peers that wait for this rank's next collective."""
    try:
        traceback.print_exc()
        environment.report(
            f"rank {environment.world_rank()} on {environment.host_name()}{RAISED_REPORT}"
            f"{type(error).__name__}: {_one_line(error)}"
        )
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


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
    hosts = allgather_object(environment.host_name())
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


class NoCommitError(RuntimeError):
    """An earlier job committed, but no host of this one holds a commit. Its name is
    elastic_protocol.NO_COMMIT_ERROR: the supervisor ends the run when it is reported."""


def _resume(state, store, allgather_object):
    """Load the newest commit any host holds into `state` on its lowest-ranked holder,
    which then roots the sync; its (generation, number), or None without one. One rank
    per host looks, since they share the folder. Commits are ordered by generation
    first: a host back from a cut-off may hold a stale commit with a current number."""
    state._store = store if basics.local_rank() == 0 else None
    everyone = allgather_object(store.newest() if basics.local_rank() == 0 else None)
    if basics.rank() == 0:  # every rank installed its handlers before this collective
        environment.report(f"{ALL_READY_REPORT} ({basics.size()} ranks)")
    best = newest_commit(everyone)
    if best is None:
        if environment.committed_before():
            raise NoCommitError(
                "an earlier job of this run committed, but no host of this job holds a commit "
                "(the hosts that held one are gone): refusing to train again from the initial state"
            )
        return None
    holder = everyone.index(best)
    if basics.rank() == holder:
        state.load_snapshot(store.load(best))
    state._commit_number = best[1]
    state._sync_root = holder
    if basics.rank() == 0:
        environment.report(
            f"{RESUMED_REPORT} {best[1]} of generation {best[0]} held by rank {holder} "
            f"(generation {environment.generation()}, {basics.size()} ranks)"
        )
    state.on_reset()
    return best


def newest_commit(held):
    """The newest of the ranks' (generation, number) commits (None: none held)."""
    return max((commit_id for commit_id in held if commit_id is not None), default=None)


def _spread(state, store, commit_id):
    """After the sync every rank holds the resumed commit: save it, so restore() comes
    back to it on every rank, and put it on file on every host that lacks it, so the
    loss of its one holder before the next commit loses nothing."""
    state.save()
    if state._store is not None and store.newest() != commit_id:
        store.write_async(commit_id[1], state.snapshot(), generation=commit_id[0])


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


def _finish(store, rank, local_rank, barrier):
    """Training ended: the commits are no longer needed. Rank 0 tells the supervisor
    first, and every rank waits for all before any removes its host's commits, so a
    failure from here on can restart nothing (the supervisor retrains nothing after
    "training finished") and one before it finds the commits in place."""
    store.flush()
    if rank == 0:
        environment.report("training finished")
    if basics.is_initialized():  # `func` may have shut lockstep down itself
        try:
            barrier()
        except Exception:
            return  # a rank was lost; the supervisor knows training finished
    if local_rank == 0:
        store.remove()
