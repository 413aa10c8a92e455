"""Tensors named like lockstep's control traffic are ordinary tensors. Join and
process-set changes are typed messages, matched and completed by their type, so a
user tensor may take the names the core once reserved for them (`__lockstep_join__`,
`__lockstep_process_set_change__.<n>`), even while a join or a change is in flight.
Run at 2 ranks."""

import time

import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd

JOIN = "__lockstep_join__"
CHANGE = "__lockstep_process_set_change__.0"


def check_plain_ops(rank, size):
    total = sum(r + 1 for r in range(size))
    assert_equal(
        hvd.allreduce(np.full(3, rank + 1, np.int32), op=hvd.Sum, name=JOIN),
        np.full(3, total, np.int32),
        f"allreduce named {JOIN}",
    )
    assert_equal(
        hvd.allgather(np.full((1, 2), rank, np.int64), name=CHANGE),
        np.repeat(np.arange(size, dtype=np.int64), 2).reshape(size, 2),
        f"allgather named {CHANGE}",
    )
    # The same names again: now answered from the response cache.
    assert_equal(
        hvd.allreduce(np.full(3, rank + 1, np.int32), op=hvd.Sum, name=JOIN),
        np.full(3, total, np.int32),
        f"cached allreduce named {JOIN}",
    )


def check_during_process_set_change(rank, size):
    """The job's first change was once the allgather named CHANGE: a tensor of that
    name in flight meanwhile must neither block the change nor be taken for it."""
    in_flight = hvd.allgather_async(np.array([[rank]], np.int32), name=CHANGE)
    first = hvd.add_process_set([0])
    assert first.process_set_id == 1, first
    assert_equal(
        hvd.synchronize(in_flight),
        np.arange(size, dtype=np.int32).reshape(size, 1),
        f"allgather named {CHANGE} in flight during add_process_set",
    )
    if first.included():
        assert_equal(hvd.allreduce(np.array([5.0]), op=hvd.Sum, name=CHANGE, process_set=first), np.array([5.0]), "set")
    assert hvd.remove_process_set(first) is True
    assert_equal(
        hvd.allreduce(np.array([rank]), op=hvd.Sum, name="__lockstep_process_set_change__.1"),
        np.array([sum(range(size))]),
        "the second change's old name",
    )


def check_during_join(rank, size):
    """Rank 0 submits a tensor named JOIN and joins while it is still pending; the last
    rank runs its JOIN tensor while rank 0 is joined, then joins."""
    if rank == 0:
        pending = hvd.allreduce_async(np.full(2, 1.0), op=hvd.Sum, name=JOIN)
        last = hvd.join()
        assert_equal(hvd.synchronize(pending), np.full(2, 1.0 + 2.0 * (size - 1)), f"{JOIN} pending across join")
    else:
        time.sleep(0.2)  # rank 0 has joined by now (either way the sum is the same)
        assert_equal(
            hvd.allreduce(np.full(2, 2.0), op=hvd.Sum, name=JOIN),
            np.full(2, 1.0 + 2.0 * (size - 1)),
            f"{JOIN} while rank 0 has joined",
        )
        last = hvd.join()
    assert last == size - 1, f"join returned {last}; rank {size - 1} joined last"
    # A joined rank contributes zeros to a tensor it never submitted.
    if rank == size - 1:
        assert_equal(hvd.allreduce(np.full(2, 3.0), op=hvd.Sum, name=JOIN), np.full(2, 3.0), "with rank 0 joined")
        last = hvd.join()
    else:
        time.sleep(0.2)
        last = hvd.join()
    assert last == size - 1, f"join returned {last}"


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check_plain_ops(rank, size)
    check_during_process_set_change(rank, size)
    check_during_join(rank, size)
    hvd.barrier()
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
