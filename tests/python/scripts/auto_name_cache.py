"""Unnamed ops that repeat hit the response cache: their automatic names restart
whenever nothing is in flight, so every pass of a loop submits the same names and
the core agrees on them through the cache's bits instead of the coordinator.
Values are checked exactly throughout, including when an automatic name comes back
with another shape (the cached response must be replaced, not reused)."""

import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd

PASSES = 20


def synchronous_ops(rank, size, step):
    summed = hvd.allreduce(np.full(6, rank + step, np.int32), op=hvd.Sum)
    assert_equal(summed, np.full(6, sum(range(size)) + size * step, np.int32), f"allreduce pass {step}")
    gathered = hvd.allgather(np.full((2, 3), rank, np.float32))
    assert_equal(
        gathered, np.repeat(np.arange(size, dtype=np.float32), 6).reshape(2 * size, 3), f"allgather pass {step}"
    )
    root = size - 1  # a root that changed would be a new response, not a cache hit
    shared = hvd.broadcast(np.full(4, rank * 10 + step, np.int64), root_rank=root)
    assert_equal(shared, np.full(4, root * 10 + step, np.int64), f"broadcast pass {step}")


def asynchronous_burst(rank, size, step):
    """Several unnamed ops in flight at once get distinct names, the same each pass."""
    handles = [hvd.allreduce_async(np.full(3, rank * (i + 1), np.float64), op=hvd.Sum) for i in range(5)]
    for i, handle in enumerate(handles):
        expected = np.full(3, sum(range(size)) * (i + 1), np.float64)
        assert_equal(hvd.synchronize(handle), expected, f"burst member {i} pass {step}")


def cache_use(stats_before, stats_after):
    return (
        stats_after["cached_responses"] - stats_before["cached_responses"],
        stats_after["negotiated_responses"] - stats_before["negotiated_responses"],
    )


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    synchronous_ops(rank, size, 0)
    asynchronous_burst(rank, size, 0)  # the first pass negotiates and fills the cache
    before = hvd.engine_stats()
    for step in range(1, PASSES):
        synchronous_ops(rank, size, step)
        asynchronous_burst(rank, size, step)
    cached, negotiated = cache_use(before, hvd.engine_stats())
    ops = (PASSES - 1) * 8
    assert cached == ops and negotiated == 0, (
        f"repeated unnamed ops: {cached} of {ops} served from the cache, {negotiated} negotiated"
    )

    # The same automatic name with a new shape each call: exact every time.
    for length in range(1, 6):
        out = hvd.allreduce(np.arange(length, dtype=np.int16) + rank, op=hvd.Sum)
        assert_equal(out, (np.arange(length) * size + sum(range(size))).astype(np.int16), f"length {length}")

    # A handle kept open keeps the count running, so names stay distinct.
    held = hvd.allreduce_async(np.ones(2, np.float32), op=hvd.Sum)
    assert_equal(hvd.allreduce(np.ones(2, np.float32), op=hvd.Sum), np.full(2, size, np.float32), "beside held")
    assert_equal(hvd.synchronize(held), np.full(2, size, np.float32), "held handle")
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
