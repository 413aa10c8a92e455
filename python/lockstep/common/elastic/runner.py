"""`hvd.elastic.run`: the loop around the user's training function.

Horovod recovers inside the process (its Gloo mode outlives a lost peer). With Open
MPI as installed a lost peer ends the whole mpirun job, so here recovery spans
processes: on HorovodInternalError (a collective failed: lockstep's AbortedError) or
HostsUpdatedInterrupt the worker finishes writing its last commit and exits with a
code that tells lockstep-run's elastic supervisor why; the supervisor starts a new
job on the hosts that are healthy now, and there `run` first agrees with the other
ranks on the newest commit any host holds, loads it on one holder and syncs it to
everyone (Horovod's restore-then-sync, across the restart). Outside such a job,
`run` syncs, calls the function, and lets errors propagate.
"""

import functools
import os
import sys

from lockstep.common import basics
from lockstep.common.elastic import environment, notification
from lockstep.common.elastic.errors import HostsUpdatedInterrupt
from lockstep.common.elastic.store import CommitStore
from lockstep.common.exceptions import AbortedError, LockstepError
from lockstep.elastic_protocol import EXIT_HOSTS_UPDATED, EXIT_PEER_LOST


def run_fn(func, allgather_object):
    """Wrap `func(state, *args, **kwargs)`; `allgather_object` is the frontend's."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        notification.install()
        if not environment.supervised():
            state.sync()
            return func(state, *args, **kwargs)
        store = CommitStore(environment.commit_root(), environment.job_id())
        try:
            _resume(state, store, allgather_object)
            state.sync()
            # Asked now: `func` may call shutdown() itself, after which the queries raise.
            rank, local_rank = basics.rank(), basics.local_rank()
            result = func(state, *args, **kwargs)
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
            _leave(store, EXIT_PEER_LOST, f"peer lost: {_one_line(error)}")
        _finish(store, rank, local_rank)
        return result

    return wrapper


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
