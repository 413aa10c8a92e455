"""Faults that must end in a clear error, never a hang, crash or wrong result.

    faults.py kill KIND        rank 1 SIGKILLs itself while every rank streams KIND
    faults.py lost KIND        the same under `mpirun --with-ft ulfm`: each survivor
                               reports the HorovodInternalError that names rank 1
    faults.py signal SIGNAME   rank 1 gets SIGINT or SIGTERM while the ranks stream allreduces
    faults.py freeze           rank 1 SIGSTOPs itself while the ranks stream 4 MiB allreduces
    faults.py in_process       in one job: a user compression raising inside result
                               handling, an allgather whose result cannot fit in
                               memory, a child forked after init() calling lockstep,
                               then shutdown() from another thread with ops pending;
                               each a named check (scripts/checks.py)

Every rank prints the shared-memory files it has mapped ("rank N: shm file: ..."),
so the test can check that none is left behind after the job ends.
"""

import atexit
import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback

import numpy as np
from checks import check
from rank_checks import assert_equal, expect_error, run_main

import lockstep.numpy as hvd

KILLED_RANK = 1


def mapped_shm_files():
    """Files in /dev/shm or Open MPI's session directories that this process maps."""
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(None, 5)[-1].strip() if len(line.split(None, 5)) == 6 else ""
            if path.startswith("/dev/shm/") or "/ompi." in path:
                paths.add(path.replace(" (deleted)", ""))
    return sorted(paths)


def report_shm(rank):
    # One short line per file: mpirun may interleave long lines of different ranks.
    print("".join(f"rank {rank}: shm file: {path}\n" for path in mapped_shm_files()), end="", flush=True)


def collective(kind, rank, size):
    """One collective of `kind`, checked; large enough to take the chunked and (at 3+
    ranks) shared-memory allreduce paths."""
    large = np.ones(1 << 18, np.float32)
    if kind == "allreduce":
        assert_equal(hvd.allreduce(large, op=hvd.Sum, name="f.ar"), large * size, "allreduce")
    elif kind == "grouped_allreduce":
        out = hvd.grouped_allreduce([large, np.ones(7, np.int32)], op=hvd.Sum, name="f.gar")
        assert_equal(out[1], np.full(7, size, np.int32), "grouped allreduce")
    elif kind == "allgather":
        out = hvd.allgather(np.full((rank + 1, 1024), rank, np.int64), name="f.ag")
        assert out.shape == (size * (size + 1) // 2, 1024), out.shape
    elif kind == "broadcast":
        assert_equal(hvd.broadcast(np.full(1 << 16, rank, np.float64), 0, name="f.bc"), np.zeros(1 << 16), "broadcast")
    elif kind == "alltoall":
        out = hvd.alltoall(np.full((size * 512, 4), rank, np.int32), name="f.a2a")
        assert out.shape == (size * 512, 4), out.shape
    elif kind == "reducescatter":
        out = hvd.reducescatter(np.ones((size * 1024, 16), np.float32), op=hvd.Sum, name="f.rs")
        assert_equal(out, np.full((1024, 16), size, np.float32), "reducescatter")
    elif kind == "barrier":
        hvd.barrier()
    else:
        raise ValueError(kind)


def killed_mid_collective(kind):
    """Rank 1 dies with SIGKILL at an arbitrary point of a stream of collectives; the
    others are inside a collective (or negotiating one) when it happens."""
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    collective(kind, rank, size)
    report_shm(rank)
    print(f"rank {rank}: first {kind} done", flush=True)
    if rank == KILLED_RANK:
        threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGKILL)).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        collective(kind, rank, size)
    print(f"rank {rank}: UNEXPECTED: {kind} kept completing without rank {KILLED_RANK}", flush=True)


def frozen_mid_allreduce():
    """Rank 1 stops (SIGSTOP) at an arbitrary point of a stream of 4 MiB allreduces, so
    the others are most likely waiting inside the shared-memory allreduce, where only
    the collective watchdog can end the job; if they were negotiating, negotiation
    names the rank instead. Either way the job must end, naming rank 1."""
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    large = np.ones(1 << 20, np.float32)
    assert_equal(hvd.allreduce(large, op=hvd.Sum, name="f.frozen"), large * size, "allreduce")
    print(f"rank {rank}: first allreduce done", flush=True)
    if rank == KILLED_RANK:
        threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGSTOP)).start()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            hvd.allreduce(large, op=hvd.Sum, name="f.frozen")
    except hvd.LockstepError as error:
        print(f"rank {rank}: STOPPED WITH ERROR: {error}", flush=True)
        sys.exit(3)
    print(f"rank {rank}: UNEXPECTED: allreduces kept completing without rank {KILLED_RANK}", flush=True)


def signalled(signal_name):
    """Rank 1 receives SIGINT (KeyboardInterrupt once its current op returns; exiting
    shuts lockstep down, which the others see) or SIGTERM (killed; mpirun ends the
    job). The survivors report the error they get."""
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    collective("allreduce", rank, size)
    report_shm(rank)
    print(f"rank {rank}: first allreduce done", flush=True)
    if rank == KILLED_RANK:
        threading.Timer(0.3, os.kill, args=(os.getpid(), getattr(signal, signal_name))).start()
    step = 0
    try:
        while step < 100000:
            collective("allreduce", rank, size)
            step += 1
    except hvd.LockstepError as error:
        print(f"rank {rank}: STOPPED WITH ERROR after {step} steps: {error}", flush=True)
        sys.exit(3)
    print(f"rank {rank}: UNEXPECTED: 100000 allreduces completed", flush=True)


def check_shutdown_from_thread(rank, size):
    """While the main thread waits on an op that can never complete (only this rank
    submits its name) and other ops are queued, another thread calls shutdown(): every
    pending handle fails with an error saying lockstep was shut down."""
    hvd.allreduce(np.ones(4, np.float32), name="before.thread.shutdown")
    lonely = [hvd.allreduce_async(np.ones(1 << 16, np.float32), name=f"lonely.{rank}.{i}") for i in range(4)]
    lonely.append(hvd.allgather_async(np.ones((3, 2), np.int32), name=f"lonely.gather.{rank}"))
    hvd.allreduce(np.ones(1, np.float32), name="all.submitted")  # every rank's ops are pending now
    stopper = threading.Timer(0.5, hvd.shutdown)
    stopper.start()
    started = time.monotonic()
    errors = [expect_error(hvd.LockstepError, ["shut down"], hvd.synchronize, handle) for handle in lonely]
    waited = time.monotonic() - started
    stopper.join()
    assert waited < 30, f"the pending handles failed only after {waited:.1f} s"
    assert all("lonely." in str(e) for e in errors), f"the errors name the tensors: {errors}"
    expect_error(ValueError, ["shut down"], hvd.allreduce, np.ones(2, np.float32))
    hvd.init()
    shutdown_with_collectives_running(rank, size)
    print(f"rank {rank}: pending handles failed {waited:.2f} s after waiting: {errors[0]}", flush=True)


def shutdown_with_collectives_running(rank, size):
    """Every rank streams large allreduces that all ranks submit, and calls shutdown()
    from another thread part-way: each handle then either holds the exact result or
    fails with the shutdown error; none hangs or holds wrong data."""
    data = np.full(1 << 18, rank + 1, np.float32)
    expected = np.full(1 << 18, size * (size + 1) // 2, np.float32)
    stopper = threading.Timer(1.0 + 0.1 * rank, hvd.shutdown)
    stopper.start()
    completed = failed = 0
    for step in range(100000):
        try:
            handles = [hvd.allreduce_async(data, op=hvd.Sum, name=f"running.{i}") for i in range(4)]
        except ValueError:  # this rank has shut down: nothing more can be submitted
            break
        except hvd.LockstepError as error:  # another rank's shutdown stopped this one first
            assert "shut down" in str(error), f"unclear error during shutdown: {error}"
            break
        for handle in handles:
            try:
                assert_equal(hvd.synchronize(handle), expected, f"allreduce during shutdown, step {step}")
                completed += 1
            except hvd.LockstepError as error:
                assert "shut down" in str(error), f"unclear error during shutdown: {error}"
                failed += 1
    stopper.join()
    assert completed > 0, "no allreduce completed before the shutdown"
    print(f"rank {rank}: {completed} allreduces completed exactly, {failed} failed cleanly at shutdown", flush=True)


def check_forked_child(rank, size):
    """A child forked after init() gets a clear error from every lockstep call and can
    exit normally (no hang joining a thread it does not have, no MPI_Finalize); the
    parent keeps working."""
    pending = hvd.allreduce_async(np.ones(3, np.float32), name="pending.across.fork")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            _child_after_fork(read_end, write_end, pending)  # never returns
        except BaseException:
            # Not back into check(), which would go on to the parent's next checks here.
            traceback.print_exc()
        os._exit(1)
    os.close(write_end)
    with os.fdopen(read_end) as stream:
        messages = json.loads(stream.read())
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}: {messages}"
    for message in messages[:5]:
        assert "fork" in message and "UNEXPECTED" not in message, f"child got {messages}"
    assert messages[5] == "is_initialized=False", messages
    result = hvd.synchronize(pending)
    assert_equal(result, np.ones(3, np.float32), "the op pending across the fork (Average)")
    total = hvd.allreduce(np.full(3, rank, np.int32), op=hvd.Sum, name="after.fork")
    assert_equal(total, np.full(3, sum(range(size)), np.int32), "the parent after the fork")
    print(f"rank {rank}: child error: {messages[0]}", flush=True)


def _child_after_fork(read_end, write_end, pending):
    os.close(read_end)
    messages = []
    try:
        for call in (
            lambda: hvd.allreduce(np.ones(2, np.float32), name="in.child"),
            lambda: hvd.allreduce_async(np.ones(2, np.float32)),
            lambda: hvd.rank(),
            lambda: hvd.synchronize(pending),
            lambda: hvd.init(),
        ):
            try:
                call()
                messages.append("UNEXPECTED: a lockstep call worked in the child")
            except Exception as error:  # each must raise, with the fork named
                messages.append(f"{type(error).__name__}: {error}")
        messages.append(f"is_initialized={hvd.is_initialized()}")
        hvd.shutdown()  # a no-op in the child
    finally:
        os.write(write_end, json.dumps(messages).encode())
        os.close(write_end)
    # A normal exit: Python's and the C library's exit hooks run (lockstep's and
    # MPI's must do nothing in the child); run_main would turn SystemExit into a
    # failure, so call them directly.
    atexit._run_exitfuncs()
    ctypes.CDLL(None).exit(0)


def check_huge_allgather(rank, size):
    """Inputs that exist (untouched, overcommitted pages) but whose gathered result
    exceeds the host's memory: a clear error on every rank before anything is
    allocated or sent; then collectives still work."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    rows = physical // (2 * 4096) + 4096  # any 2 ranks together exceed the memory
    huge = np.empty((rows, 4096), np.uint8)  # never written, so never resident
    error = expect_error(
        hvd.LockstepError, ["allgather", "huge.gather", "memory"], hvd.allgather, huge, name="huge.gather"
    )
    del huge
    print(f"rank {rank}: huge allgather: {type(error).__name__}: {error}", flush=True)
    result = hvd.allgather(np.full((2, 2), rank, np.int16), name="after.huge")
    assert_equal(result, np.repeat(np.arange(size, dtype=np.int16), 2)[:, None].repeat(2, 1), "after")


class FailingCompression:
    """A user compressor whose decompress raises, as a user callback might."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        raise KeyError("failure inside the user's decompress")


def failing_finish(rank, size):
    """An exception in user code that runs on the result (a compression's
    decompress) surfaces from the call that ran it; the engine keeps working and the
    name can be reused."""
    for _attempt in range(3):
        expect_error(
            KeyError,
            ["user's decompress"],
            hvd.allreduce,
            np.ones(4, np.float32),
            name="user.callback",
            compression=FailingCompression,
        )
        handle = hvd.allreduce_async(np.ones(4, np.float32), name="user.callback.async", compression=FailingCompression)
        expect_error(KeyError, ["user's decompress"], hvd.synchronize, handle)
    total = hvd.allreduce(np.full(4, rank, np.float32), op=hvd.Sum, name="user.callback")
    assert_equal(total, np.full(4, sum(range(size)), np.float32), "after the failing callbacks")


def lost_under_ulfm(kind):
    """As killed_mid_collective, but the launcher keeps the job up (ULFM): each survivor's
    next call fails, and the error must name the lost rank and its host."""
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    collective(kind, rank, size)
    report_shm(rank)
    print(f"rank {rank}: first {kind} done", flush=True)
    if rank == KILLED_RANK:
        threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGKILL)).start()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            collective(kind, rank, size)
    except hvd.HorovodInternalError as error:
        print(f"rank {rank}: lost: {' '.join(str(error).split())}", flush=True)
        hvd.shutdown()
        # The launcher ends the job at the first non-zero exit: let the other survivor
        # report first.
        time.sleep(3)
        sys.exit(5)
    print(f"rank {rank}: UNEXPECTED: {kind} kept completing without rank {KILLED_RANK}", flush=True)


def main():
    mode = sys.argv[1]
    if mode == "kill":
        killed_mid_collective(sys.argv[2])
    elif mode == "lost":
        lost_under_ulfm(sys.argv[2])
    elif mode == "signal":
        signalled(sys.argv[2])
    elif mode == "freeze":
        frozen_mid_allreduce()
    else:
        assert mode == "in_process", mode
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        report_shm(rank)
        check("failing_callbacks", failing_finish, rank, size)
        check(check_huge_allgather, rank, size)
        check(check_forked_child, rank, size)
        check(check_shutdown_from_thread, rank, size)  # last: it shuts lockstep down


if __name__ == "__main__":
    if sys.argv[1] == "signal":
        main()  # let KeyboardInterrupt and SystemExit end the process normally
    else:
        run_main(main)
