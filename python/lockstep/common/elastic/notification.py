"""How a running worker learns that the launcher changed the job's hosts.

The supervisor sends SIGUSR1 (hosts added) or SIGUSR2 (hosts removed) to mpirun,
which forwards them to every rank of its job (Open MPI's documented behaviour,
checked on 4.1.4). Only processes of the job's user can signal it, so the channel
needs no socket and no secret. The handler only records the signal; ranks agree on
it at the next commit (State.check_host_updates), because it reaches them at
different times.
"""

import signal
import socket
import threading

from lockstep.common.elastic import environment

ADDED = 1
REMOVED = 2
_SIGNALS = {signal.SIGUSR1: ADDED, signal.SIGUSR2: REMOVED}

_lock = threading.Lock()
_pending = 0
_installed = False


def _record(signum, _frame):
    global _pending
    _pending |= _SIGNALS.get(signum, 0)


def install():
    """Install the handlers once, in the main thread, and tell the supervisor (through
    the job's output) that this rank may now be signalled: before this, SIGUSR1's
    default action would end the process."""
    global _installed
    with _lock:
        if _installed or threading.current_thread() is not threading.main_thread():
            return
        for signum in _SIGNALS:
            signal.signal(signum, _record)
            # Restart system calls the signal interrupts in MPI's and lockstep's threads.
            signal.siginterrupt(signum, False)
        _installed = True
    if environment.supervised():
        # Its host under both names: the supervisor blacklists the host list's name for
        # the machine name that MPI's and lockstep's messages give.
        environment.report(
            f"ready rank {environment.world_rank()} host {environment.host_name()} machine {socket.gethostname()}"
        )


def peek_pending():
    """The updates seen since the last take_pending() (ADDED | REMOVED bits)."""
    with _lock:
        return _pending


def take_pending():
    """The updates seen since the last call (ADDED | REMOVED bits), cleared."""
    global _pending
    with _lock:
        pending, _pending = _pending, 0
    return pending
