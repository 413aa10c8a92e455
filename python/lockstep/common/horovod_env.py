"""Horovod's worker environment: HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK,
HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE and HOROVOD_HOSTNAME.

horovodrun sets them for each worker before it starts; mpirun cannot set per-rank
values, so init() fills them in from the job's real topology once it is known,
under lockstep-run and plain mpirun alike. HOROVOD_HOSTNAME is the host's name as
lockstep-run's host list or discovery script gave it (LOCKSTEP_HOST_NAMES, in the
order mpirun fills the hosts; "localhost" without a host list, as horovodrun says),
else the name MPI reports for the machine. A variable the user set is left as it
is; one init() set is updated by the next init() (after shutdown()).

HOROVOD_ELASTIC=1 comes from lockstep-run's elastic supervisor, not from here.
"""

import os

from lockstep import _core
from lockstep.elastic_protocol import HOST_NAMES_VARIABLE

# What init() wrote, by name: those it may update; others belong to the user.
_written = {}


def host_index(hostnames, rank):
    """The index of `rank`'s host among the job's hosts ordered by their lowest rank:
    the position of its entry in the host list mpirun was given, whether it fills
    hosts slot by slot (lockstep-run's mapping) or round-robin."""
    order = list(dict.fromkeys(hostnames))
    return order.index(hostnames[rank])


def worker_values():
    """The HOROVOD_* values for this rank, from the running (or peer-stopped) engine."""
    rank = _core.rank()
    hostnames = _core.hostnames()
    listed = [name for name in os.environ.get(HOST_NAMES_VARIABLE, "").split(",") if name]
    index = host_index(hostnames, rank)
    hostname = listed[index] if index < len(listed) else hostnames[rank]
    return {
        "HOROVOD_RANK": rank,
        "HOROVOD_SIZE": _core.size(),
        "HOROVOD_LOCAL_RANK": _core.local_rank(),
        "HOROVOD_LOCAL_SIZE": _core.local_size(),
        "HOROVOD_CROSS_RANK": _core.cross_rank(),
        "HOROVOD_CROSS_SIZE": _core.cross_size(),
        "HOROVOD_HOSTNAME": hostname,
    }


def publish():
    """Set the HOROVOD_* worker variables in os.environ (called by init()).

    HOROVOD_SIZE is what lockstep's launch check reads to refuse a plain `python`
    start of a script meant for a launcher; the value set here is this process's own
    MPI world size, so a later init() in this process (elastic reset, shutdown() then
    init()) passes the check, and it is updated there."""
    for name, value in worker_values().items():
        value = str(value)
        current = os.environ.get(name)
        if current is None or current == _written.get(name):
            os.environ[name] = value
            _written[name] = value
