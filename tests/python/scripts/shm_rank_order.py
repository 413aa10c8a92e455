"""The shared-memory allreduce reduces every element in rank order, ((x0 + x1) + x2) ...,
whichever path a chunk takes (one pass below 128 KiB of other ranks' data, split into
per-rank segments above it, several 1 MiB chunks for the largest), in place or not:
float32 sums are compared bit for bit with that order computed here, so a segment
reduced in another order, a stale slot or an input overwritten too early shows."""

import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd

# Elements of float32: around the one-pass limit at 2 to 4 ranks (128 KiB, 64 KiB,
# 43 KiB of one rank's data), odd lengths whose segments do not divide evenly, and
# several chunks with a short last one.
COUNTS = [1, 3, 1000, 10923, 16384, 16385, 32767, 32768, 32769, 65537, 262144, 600001]


def contribution(count, rank, salt):
    """Values whose float32 sums round differently in different orders."""
    rng = np.random.default_rng(1000 * rank + salt)
    return (rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count)).astype(np.float32)


def in_rank_order(inputs):
    total = inputs[0].copy()
    for values in inputs[1:]:
        total = total + values  # float32 + float32 rounds once per step, as the core does
    return total


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for salt, count in enumerate(COUNTS):
        inputs = [contribution(count, r, salt) for r in range(size)]
        expected = in_rank_order(inputs)
        result = hvd.allreduce(inputs[rank], op=hvd.Sum, name=f"order.{count}")
        assert_equal(result, expected, f"allreduce of {count} float32")
        in_place = inputs[rank].copy()
        hvd.allreduce_(in_place, op=hvd.Sum, name=f"order.inplace.{count}")
        assert_equal(in_place, expected, f"in-place allreduce of {count} float32")
        # Twice more in a row: consecutive runs alternate slots.
        for again in range(2):
            assert_equal(hvd.allreduce(inputs[rank], op=hvd.Sum, name=f"order.{count}"), expected, f"rerun {again}")
    # A fused group: small tensors share a chunk with part of a large one.
    group = [contribution(n, rank, 99) for n in (5, 40000, 300000)]
    results = hvd.grouped_allreduce(group, op=hvd.Sum, name="order.group")
    for n, result in zip((5, 40000, 300000), results):
        expected = in_rank_order([contribution(n, r, 99) for r in range(size)])
        assert_equal(result, expected, f"grouped allreduce, {n} float32")
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
