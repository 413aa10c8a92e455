"""What the elastic supervisor tells its workers, through LOCKSTEP_ELASTIC_* variables."""

import os
import socket
import sys

from lockstep.launcher.elastic_protocol import (
    COMMIT_DIR_VARIABLE,
    COMMIT_KEY_VARIABLE,
    COMMITTED_VARIABLE,
    GENERATION_VARIABLE,
    JOB_ID_VARIABLE,
    MIN_NP_VARIABLE,
    REPORT_PREFIX,
)


def supervised():
    """True inside a job started by `lockstep-run --host-discovery-script ...`."""
    return bool(os.environ.get(JOB_ID_VARIABLE))


def job_id():
    return os.environ.get(JOB_ID_VARIABLE, "")


def generation():
    """0 for the first mpirun job of an elastic run, then 1, 2, ... per restart."""
    try:
        return int(os.environ.get(GENERATION_VARIABLE, "0"))
    except ValueError:
        return 0


def in_process_recovery_wanted():
    """LOCKSTEP_ELASTIC_IN_PROCESS=0 makes survivors take the restart path even where
    they could go on in process (to compare the two, or to rule one out)."""
    return os.environ.get("LOCKSTEP_ELASTIC_IN_PROCESS", "1") != "0"


def min_np():
    """The fewest ranks the job may train with (lockstep-run's --min-np)."""
    try:
        return int(os.environ.get(MIN_NP_VARIABLE, "1"))
    except ValueError:
        return 1


def commit_root():
    """Where committed state lives on each host: local tmpfs by default, so it survives
    the process but costs no disk write."""
    base = os.environ.get(COMMIT_DIR_VARIABLE)
    if base:
        return base
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else os.environ.get("TMPDIR", "/tmp")
    return os.path.join(shm, f"lockstep-elastic-{os.geteuid()}")


def commit_key():
    """The job's key for signing commit files (bytes; empty outside a supervised job)."""
    try:
        return bytes.fromhex(os.environ.get(COMMIT_KEY_VARIABLE, ""))
    except ValueError:
        return b""


def committed_before():
    """Whether an earlier job of this run made a commit: then one must be found."""
    return os.environ.get(COMMITTED_VARIABLE) == "1"


def host_name():
    """This host as the host list or discovery script names it (what the supervisor
    blacklists), once init() has set HOROVOD_HOSTNAME; else the machine's name."""
    return os.environ.get("HOROVOD_HOSTNAME") or socket.gethostname()


def world_rank():
    # Open MPI's variable: usable before init() and after a failed shutdown.
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))


def report(message):
    """One line for the supervisor, which reads the job's output."""
    print(f"{REPORT_PREFIX} {message}", file=sys.stdout, flush=True)
