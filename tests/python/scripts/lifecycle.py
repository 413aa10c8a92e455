"""Ops before init() and after shutdown() fail clearly; shutdown() with ops pending
fails their handles instead of hanging; init() and shutdown() are idempotent. Each a
named check (scripts/checks.py)."""

import time

import numpy as np
from checks import check
from rank_checks import expect_error, run_main, world_rank, world_size

import lockstep
import lockstep.numpy as hvd

NOT_INITIALIZED = ["not been initialized", "hvd.init()"]
SHUT_DOWN = ["has been shut down", "hvd.init()"]


def check_uninitialized_everything(when, fragments):
    data = np.ones(3, np.float32)
    calls = [
        (hvd.rank, ()),
        (hvd.size, ()),
        (hvd.local_rank, ()),
        (hvd.local_size, ()),
        (hvd.cross_rank, ()),
        (hvd.cross_size, ()),
        (hvd.mpi_threads_supported, ()),
        (lockstep.rank, ()),
        (hvd.allreduce, (data,)),
        (hvd.allreduce_async, (data,)),
        (hvd.grouped_allreduce, ([data],)),
        (hvd.allgather, (data,)),
        (hvd.broadcast, (data, 0)),
        (hvd.alltoall, (data,)),
        (hvd.reducescatter, (data,)),
        (hvd.barrier, ()),
        (hvd.join, ()),
        (hvd.broadcast_object, ("x",)),
        (hvd.allgather_object, ("x",)),
        (hvd.start_timeline, ("/tmp/unused.json",)),
    ]
    for function, args in calls:
        error = expect_error(ValueError, fragments, function, *args)
        assert isinstance(error, hvd.LockstepError), f"{function.__name__} {when}: also a LockstepError"
    assert not hvd.is_initialized(), f"is_initialized() {when}"
    assert hvd.mpi_built() and hvd.mpi_enabled(), f"build queries work {when}"


def check_shutdown_with_pending_ops(rank, size):
    # Names no other rank submits, so these ops are still pending at shutdown.
    lonely = [hvd.allreduce_async(np.ones(5, np.float32), name=f"pending.{rank}.{i}") for i in range(3)]
    lonely.append(hvd.allgather_async(np.ones((2, 2), np.int32), name=f"pending.gather.{rank}"))
    # Every rank has submitted its pending ops before any rank shuts down; otherwise an
    # early shutdown would refuse a late rank's submission instead of failing its handle.
    hvd.allreduce(np.zeros(1, np.float32), name="all.pending.submitted")
    hvd.shutdown()
    for handle in lonely:
        error = expect_error(hvd.LockstepError, [], hvd.synchronize, handle)
        assert str(error), "the shutdown error has a message"
    hvd.shutdown()  # idempotent


def check_ops_after_idle(rank, size):
    """Idle ranks cycle more and more rarely; a collective submitted after a long idle
    spell, by the ranks at different moments, still completes with the right value."""
    for round_index in range(3):
        time.sleep(0.3)  # long enough for the idle cycle to stretch to its longest
        time.sleep(0.02 * rank)  # ranks submit one after another
        total = hvd.allreduce(np.full(3, rank + round_index, np.float64), op=hvd.Sum, name=f"after.idle.{round_index}")
        expected = sum(range(size)) + size * round_index
        assert total.tolist() == [expected] * 3, f"allreduce after idle round {round_index}: {total}"


def check_init_is_idempotent(rank, size):
    hvd.init()
    hvd.init()
    assert hvd.is_initialized() and hvd.rank() == rank and hvd.size() == size, "init() worked"
    total = hvd.allreduce(np.full(2, rank, np.int32), op=hvd.Sum)
    assert total.tolist() == [sum(range(size))] * 2, f"allreduce before shutdown: {total}"


def main():
    rank, size = world_rank(), world_size()
    check("ops_before_init_fail_clearly", check_uninitialized_everything, "before init()", NOT_INITIALIZED)
    check(check_init_is_idempotent, rank, size)
    check(check_ops_after_idle, rank, size)
    check(check_shutdown_with_pending_ops, rank, size)
    check("ops_after_shutdown_fail_clearly", check_uninitialized_everything, "after shutdown()", SHUT_DOWN)


if __name__ == "__main__":
    run_main(main)
