"""Horovod's elastic exceptions and the exit codes a worker hands its supervisor.

With Open MPI as installed (no ULFM), a lost peer ends the whole mpirun job, so a
worker cannot recover in place: it exits with a code that tells `lockstep-run`'s
elastic supervisor why, and the supervisor starts a new job that resumes from the
last commit.
"""

from lockstep.common.exceptions import HorovodInternalError  # noqa: F401 (re-exported)


class HostsUpdatedInterrupt(RuntimeError):
    """The launcher announced a change of hosts; raised on every rank at the same
    commit. `skip_sync` is True when hosts were only removed (every worker
    left holds the current state), as in Horovod."""

    def __init__(self, skip_sync=False):
        super().__init__("the job's hosts changed")
        self.skip_sync = skip_sync
