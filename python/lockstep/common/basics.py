"""Life cycle and topology queries, shared by every frontend."""

import atexit
import os

from lockstep import _core
from lockstep.common import horovod_env
from lockstep.common import process_sets as process_sets_module
from lockstep.common.exceptions import AbortedError, LockstepError, NotInitializedError

_exit_hook_registered = False


def init(comm=None, process_sets=None):
    """Start lockstep on MPI_COMM_WORLD. Idempotent.

    MPI is initialized here unless the program already did (e.g. mpi4py).
    `process_sets`: ProcessSet objects to register (ids 1, 2, ... in order; every
    rank passes the same list), or "dynamic", which is accepted for Horovod's sake:
    add_process_set() works in any case.
    """
    if comm is not None:
        raise ValueError(
            "lockstep runs on MPI_COMM_WORLD only and does not accept a communicator "
            f"or list of ranks (got comm={comm!r}); call init() without arguments"
        )
    fresh_start = not _core.is_initialized()
    _core.init()
    process_sets_module.setup_after_init(process_sets, fresh_start)
    horovod_env.publish()
    global _exit_hook_registered
    if not _exit_hook_registered:
        # Python runs atexit hooks in reverse order of registration, so this runs
        # before mpi4py's MPI_Finalize hook (registered when mpi4py was imported);
        # lockstep's C-level hook would run too late and touch a finalized MPI.
        atexit.register(_core.shutdown)
        _exit_hook_registered = True


def shutdown():
    """Stop the background thread; pending ops fail. Idempotent."""
    _core.shutdown()


def can_recover_in_process():
    """Whether a lost process leaves the other ranks running, so that they can go on
    without it: an MPI with ULFM (Open MPI 5, as installed) in a job started with
    `mpirun --with-ft ulfm`, as lockstep-run starts elastic jobs."""
    return _core.can_recover_in_process()


def every_process_alive():
    """Collective: True on every rank if no process of the job has failed, False on
    every survivor if one has (ULFM's agreement: the same answer on every rank, even
    when a process fails during the call). Elastic commits ask before they save; it
    also answers once a lost peer stopped lockstep (before recover_with_survivors())."""
    return _core.every_process_alive()


def recover_with_survivors():
    """Collective over the survivors once a lost process stopped lockstep: lockstep
    starts again over them, ranks renumbered in their old order. Process sets other
    than the global one are gone (their ranks no longer exist). The HOROVOD_* worker
    variables keep the values of the process's start, as under Horovod's elastic mode."""
    _core.recover_with_survivors()
    process_sets_module.setup_after_init(None, fresh_start=True)


def is_initialized():
    return _core.is_initialized()


def require_initialized():
    """Raise unless init() has run and the engine is running: NotInitializedError (a
    ValueError, as Horovod's) before init() and after this rank's own shutdown();
    AbortedError, a HorovodInternalError naming the cause, once a peer's shutdown or
    failure stopped the engine (what Horovod raises for a collective then)."""
    if not _core.is_initialized():
        raise not_running_error()


def not_running_error():
    """The error for an op while lockstep is not running (see require_initialized)."""
    reason = _core.not_running_reason() or None
    try:
        _core.rank()  # answers while a stopped engine is still this rank's
    except LockstepError:
        return NotInitializedError(reason)
    return AbortedError(reason)


def _topology(query):
    """Topology queries answer from init() until this rank's own shutdown(), also after
    a peer's shutdown or failure stopped the engine (as Horovod's do); before init()
    and after shutdown() they raise NotInitializedError, a ValueError as in Horovod."""
    try:
        return query()
    except NotInitializedError:
        raise
    except LockstepError as error:  # no engine in this process
        raise NotInitializedError(str(error)) from None


def rank():
    return _topology(_core.rank)


def size():
    return _topology(_core.size)


def local_rank():
    return _topology(_core.local_rank)


def local_size():
    return _topology(_core.local_size)


def cross_rank():
    return _topology(_core.cross_rank)


def cross_size():
    return _topology(_core.cross_size)


def mpi_threads_supported():
    return _topology(_core.mpi_threads_supported)


def mpi_built():
    return _core.mpi_built()


def mpi_enabled():
    # MPI is the only controller lockstep has.
    return True


def nccl_built():
    """As Horovod's: NCCL_VERSION_CODE (e.g. 22809) of the NCCL this build's GPU
    collectives were compiled against, else 0 (a build without the NCCL backend).
    Whether they can run in this process (driver, GPU, libnccl) is
    nccl_info()["problem"]."""
    return _core.nccl_built()


def nccl_info():
    """The NCCL this process would use and whether GPU collectives can run here, as a
    dict: built_version, runtime_version, library_path, source ("already loaded by
    the process", e.g. torch's own copy, or "opened by lockstep"), cuda_devices, and
    problem (what is missing; empty where nothing is). Not in Horovod; works before
    init()."""
    return _core.nccl_info()


# Horovod's build-information queries, answered for this build: lockstep talks MPI
# (its only controller) and, when built with it, NCCL; none of the other backends.


def gloo_built():
    return False


def gloo_enabled():
    return False


def ccl_built():
    return False


def cuda_built():
    # GPU (CUDA) code is built with the NCCL backend only.
    return bool(_core.nccl_built())


def rocm_built():
    return False


def ddl_built():
    return False


def engine_stats():
    """Counters of this process's background loop since init(), as a dict: `cycles`,
    `full_rounds` (cycles that went through the coordinator), `cached_responses`
    (collectives agreed on through the response cache's bits) and
    `negotiated_responses` (those the coordinator built). Not in Horovod; for
    checking that a training loop runs on the cached fast path."""
    require_initialized()
    return _core.engine_stats()


def start_timeline(file_path, mark_cycles=False):
    """Record a Chrome-tracing timeline of every op to file_path."""
    require_initialized()
    if not isinstance(mark_cycles, bool):
        raise TypeError(f"mark_cycles must be a bool, got {type(mark_cycles).__name__}")
    _core.start_timeline(os.fspath(file_path), mark_cycles)


def stop_timeline():
    require_initialized()
    _core.stop_timeline()
