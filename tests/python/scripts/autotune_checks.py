"""LOCKSTEP_AUTOTUNE=1: collectives stay exact while the autotuner changes chunk
size, fusion threshold, cycle time and the shared-memory switch between cycles, and
the tuning ends (the test reads the CSV log and the ranks' final settings)."""

import numpy as np
from rank_checks import assert_equal, run_main

import lockstep.numpy as hvd

STEPS = 150


def one_step(rank, size, step):
    # A gradient set in miniature: small tensors that fuse, and ones large enough
    # (2 MiB, 6 MiB) that the chunk size and the shared-memory path matter.
    tensors = [np.full(n, rank + 1 + i, np.float32) for i, n in enumerate((7, 300, 5000, 1 << 19, 3 << 19))]
    handles = [hvd.allreduce_async(t, op=hvd.Sum, name=f"grad.{i}") for i, t in enumerate(tensors)]
    expected_base = sum(range(1, size + 1))
    for i, handle in enumerate(handles):
        out = hvd.synchronize(handle)
        assert_equal(out, np.full(out.shape, expected_base + size * i, np.float32), f"step {step} tensor {i}")
    group = hvd.grouped_allreduce([np.full(3, rank, np.int64), np.full(70000, rank, np.float64)], op=hvd.Sum)
    assert_equal(group[0], np.full(3, sum(range(size)), np.int64), f"step {step} group int64")
    assert_equal(group[1], np.full(70000, sum(range(size)), np.float64), f"step {step} group float64")


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    for step in range(STEPS):
        one_step(rank, size, step)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
