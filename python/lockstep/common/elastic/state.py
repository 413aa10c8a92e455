"""Horovod's elastic State and ObjectState, shared by every frontend.

A State holds what training must not lose. `commit()` saves it in memory (what
`restore()` returns to) and, in a job under lockstep-run's elastic supervisor, hands
a copy to this host's CommitStore, where a restarted process finds it; then it checks
whether the launcher announced new hosts. `sync()` gives every rank the state of one
rank: rank 0, or after a restart the rank that holds the newest commit.
"""

import copy

from lockstep.common import basics
from lockstep.common.elastic import environment, notification
from lockstep.common.elastic.errors import HostsUpdatedInterrupt
from lockstep.common.exceptions import AbortedError
from lockstep.launcher.elastic_protocol import COMMITTED_REPORT


class State:
    """The base of every elastic state. Subclasses implement save, restore, sync and
    the snapshot pair (what a commit persists, and loading it back)."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []
        # Commits since the job began, across restarts: names the files of the store.
        self._commit_number = 0
        self._store = None
        self._sync_root = 0
        # In-process recovery (elastic.run under ULFM): a commit first agrees that no
        # process failed, since a step that overlapped a failure may be wrong.
        self._agree_before_commit = False
        self._failure_agreed = False
        self._commit_reported = False

    def register_reset_callbacks(self, callbacks):
        """Functions called (no arguments) after the job's membership changed, e.g. to
        scale the learning rate by the new size()."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Save the state (restore() comes back here; a restarted job resumes here), then
        raise HostsUpdatedInterrupt on every rank if the launcher changed the hosts.

        The copy for the store is written only once check_host_updates' broadcast has
        gone through: under ULFM a collective that overlaps a lost peer can return
        success with a wrong result on some survivors, and that broadcast is the first
        call to fail after it, so a step that may be wrong is never what a restart
        resumes from.

        Where survivors recover in process, every rank first agrees that no process has
        failed (one agreement, the same answer on every rank): a step after which one did
        raises HorovodInternalError on every rank instead, and restore() returns to the
        previous commit."""
        if self._agree_before_commit and not self._agree():
            raise AbortedError(
                "lockstep stopped: a process of the job was lost during this step (the commit's agreement found it)"
            )
        self.save()
        self._commit_number += 1
        snapshot = self.snapshot() if self._store is not None else None
        try:
            self.check_host_updates()
        except HostsUpdatedInterrupt:
            self._persist(snapshot)  # every rank is alive and agreed
            raise
        self._persist(snapshot)

    def _agree(self):
        """This commit's agreement that every process is alive. Each rank takes part in
        exactly one agreement between two commits, here or, if it failed before reaching
        the commit, in the recovery (runner.py): so a failed one is remembered."""
        alive = basics.every_process_alive()
        self._failure_agreed = not alive
        return alive

    def _persist(self, snapshot):
        if self._store is None:
            return
        self._store.write_async(self._commit_number, snapshot)
        # The supervisor then has later jobs refuse to start without a commit.
        if not self._commit_reported and self._rank() == 0:
            self._commit_reported = True
            environment.report(f"{COMMITTED_REPORT} (number {self._commit_number})")

    def check_host_updates(self):
        """Raise HostsUpdatedInterrupt on every rank if the launcher has announced a
        change of hosts. Rank 0's view decides (one broadcast), so all ranks raise at the
        same call; the others keep a signal rank 0 has not seen yet for the next call."""
        mine = notification.peek_pending()
        agreed = self._bcast_object(mine if self._rank() == 0 else None)
        if agreed:
            notification.take_pending()
            # As in Horovod: when hosts were only removed, every worker left holds the state.
            raise HostsUpdatedInterrupt(skip_sync=agreed == notification.REMOVED)

    # --- implemented by subclasses ---------------------------------------------
    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        pass

    def snapshot(self):
        """A picklable copy of the saved state, for the commit store."""
        raise NotImplementedError()

    def load_snapshot(self, snapshot):
        """Make `snapshot` the saved state and restore it."""
        raise NotImplementedError()


class ObjectState(State):
    """Plain picklable values (epoch, batch, ...) as attributes: `state.epoch`."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr)) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state, root_rank=self._sync_root)
            self._set_attrs()

    def snapshot(self):
        return {"objects": self._saved_state}

    def load_snapshot(self, snapshot):
        self._saved_state = dict(snapshot["objects"])
        self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, copy.deepcopy(value))
