"""Horovod's worker environment: HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK,
HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE and HOROVOD_HOSTNAME.

horovodrun sets them for each worker before it starts; mpirun cannot set per-rank
values, so init() fills them in from the job's real topology once it is known,
under lockstep-run and plain mpirun alike. HOROVOD_HOSTNAME is the host's name as
lockstep-run's host list or discovery script gave it (LOCKSTEP_HOST_NAMES; the entry
that names this machine or one of its addresses, else the one in the position mpirun
fills; "localhost" without a host list, as horovodrun says), else the name MPI
reports for the machine. A variable the user set is left as it
is; one init() set is updated by the next init() (after shutdown()).

HOROVOD_ELASTIC=1 comes from lockstep-run's elastic supervisor, not from here.
"""

import ipaddress
import os
import socket

from lockstep import _core
from lockstep.launcher.elastic_protocol import HOST_NAMES_VARIABLE

# What init() wrote, by name: those it may update; others belong to the user.
_written = {}


def host_index(hostnames, rank):
    """The index of `rank`'s host among the job's hosts ordered by their lowest rank:
    the position of its entry in the host list when mpirun fills the hosts in the
    list's order (Open MPI 5 does; Open MPI 4.1's mpirun was seen to place them
    otherwise, hence listed_name_of_this_host first)."""
    order = list(dict.fromkeys(hostnames))
    return order.index(hostnames[rank])


def _is_own_address(name):
    """Whether `name` resolves to an address of this machine (binding to it works);
    loopback names say nothing about which host this is."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, address in infos:
        if ipaddress.ip_address(address[0]).is_loopback:
            continue
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((address[0], 0))
            return True
        except OSError:
            continue
    return False


def listed_name_of_this_host(listed, processor_name):
    """The host-list entry naming this machine: one equal to the name MPI reports (or
    its first label), else one whose address is this machine's; None if none is."""
    short = processor_name.split(".")[0]
    for name in listed:
        if name == processor_name or name.split(".")[0] == short:
            return name
    for name in dict.fromkeys(listed):
        if _is_own_address(name):
            return name
    return None


def worker_values():
    """The HOROVOD_* values for this rank, from the running (or peer-stopped) engine."""
    rank = _core.rank()
    hostnames = _core.hostnames()
    listed = [name for name in os.environ.get(HOST_NAMES_VARIABLE, "").split(",") if name]
    hostname = None
    if len(set(listed)) > 1:
        hostname = listed_name_of_this_host(listed, hostnames[rank])
    if hostname is None:
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
