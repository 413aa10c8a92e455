"""Sums of 8- and 16-bit integers wrap, never saturate, at every length (Open MPI 4.1's
AVX op component saturates from about 16 elements on): allreduce (alone, fused in a
group, in place) and reducescatter, through whichever path the job's settings pick."""

import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd

DTYPES = [np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16)]
# Around the vector widths (16, 32, 64 bytes), past the shared-memory threshold (64 KiB),
# up to 100k elements.
LENGTHS = [1, 3, 4, 15, 16, 17, 31, 32, 33, 64, 100, 1000, 4097, 40000, 65536, 100000]


def overflowing_values(dtype, count, rank):
    """Values near the top (and for signed types, the bottom) of the range, varying
    per element, so every rank count overflows in both directions."""
    info = np.iinfo(dtype)
    index = np.arange(count, dtype=np.int64)
    high = info.max - (index * 7 + rank * 3) % 50
    if info.min < 0:
        low = info.min + (index * 5 + rank) % 50
        return np.where(index % 2 == 0, high, low).astype(dtype)
    return high.astype(dtype)


def wrapped_sum(inputs, dtype):
    total = np.zeros(inputs[0].shape, np.int64)
    for values in inputs:
        total += values.astype(np.int64)
    return total.astype(dtype)  # numpy's narrowing cast wraps modulo 2^bits


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for dtype in DTYPES:
        for count in LENGTHS:
            inputs = [overflowing_values(dtype, count, r) for r in range(size)]
            expected = wrapped_sum(inputs, dtype)
            what = f"{dtype.name} x {count}"
            assert_equal(hvd.allreduce(inputs[rank], op=hvd.Sum, name=f"wrap.{what}"), expected, f"allreduce {what}")
            in_place = inputs[rank].copy()
            hvd.allreduce_(in_place, op=hvd.Sum, name=f"wrap.inplace.{what}")
            assert_equal(in_place, expected, f"in-place allreduce {what}")
            rows = (count // size) * size
            if rows:
                share = hvd.reducescatter(inputs[rank][:rows], op=hvd.Sum, name=f"wrap.rs.{what}")
                per_rank = rows // size
                assert_equal(share, expected[rank * per_rank : (rank + 1) * per_rank], f"reducescatter {what}")
        # Small tensors fused into one buffer with a long one.
        group = [overflowing_values(dtype, n, rank) for n in (5, 17, 70000)]
        results = hvd.grouped_allreduce(group, op=hvd.Sum, name=f"wrap.group.{dtype.name}")
        for n, result in zip((5, 17, 70000), results):
            want = wrapped_sum([overflowing_values(dtype, n, r) for r in range(size)], dtype)
            assert_equal(result, want, f"grouped allreduce {dtype.name} x {n}")
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
