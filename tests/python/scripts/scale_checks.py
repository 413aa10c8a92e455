"""Many ranks (16-64, oversubscribed): numpy collectives with exact values, the cached
path, then a rank that stops answering. With the argument `freeze K`, rank K stops
itself (SIGSTOP) once the checks pass; every other rank keeps submitting small
allreduces and must get an AbortedError naming rank K within the peer timeout.
Kept short: dozens of ranks share two cores."""

import os
import signal
import sys
import time

import numpy as np

import lockstep.numpy as hvd


def check(condition, what):
    if not condition:
        print(f"rank {hvd.rank()}: FAILED: {what}", flush=True)
        sys.stdout.flush()
        os._exit(1)  # ends the job at once instead of leaving the others waiting


def collectives(rank, size):
    total = size * (size - 1) // 2
    got = hvd.allreduce(np.array([rank, 1, -rank], np.int64), name="sum", op=hvd.Sum)
    check(np.array_equal(got, [total, size, -total]), f"int64 sum {got}")
    got = hvd.allreduce(np.full(3, float(rank), np.float64), name="avg")
    check(np.array_equal(got, np.full(3, total / size)), f"float64 average {got}")
    got = hvd.allreduce(np.array([rank], np.int32), name="max", op=hvd.Max)
    check(got.tolist() == [size - 1], f"max {got}")
    rows = rank % 3 + 1  # uneven first dimension
    got = hvd.allgather(np.full((rows, 2), rank, np.int32), name="gather")
    want = np.concatenate([np.full((r % 3 + 1, 2), r, np.int32) for r in range(size)])
    check(np.array_equal(got, want), "allgather rows")
    got = hvd.broadcast(np.full(4, rank, np.float32), root_rank=size - 1, name="bcast")
    check(np.array_equal(got, np.full(4, size - 1, np.float32)), f"broadcast {got}")
    got = hvd.alltoall(np.arange(size, dtype=np.int32) + rank * size, name="a2a")
    check(np.array_equal(got, np.arange(size, dtype=np.int32) * size + rank), f"alltoall {got}")
    got = hvd.reducescatter(np.arange(2 * size, dtype=np.int32), name="rs", op=hvd.Sum)
    check(np.array_equal(got, np.arange(2 * rank, 2 * rank + 2, dtype=np.int32) * size), f"reducescatter {got}")
    for step in range(5):  # the same name again: the response cache's path
        got = hvd.allreduce(np.array([rank + step], np.int64), name="sum", op=hvd.Sum)
        check(got.tolist() == [total + size * step], f"cached sum {got}")


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    collectives(rank, size)
    print(f"rank {rank}: ALL CHECKS PASSED", flush=True)
    if sys.argv[1:2] != ["freeze"]:
        hvd.shutdown()
        return
    victim = int(sys.argv[2])
    hvd.barrier()
    if rank == victim:
        os.kill(os.getpid(), signal.SIGSTOP)
    started = time.monotonic()
    try:
        for _step in range(1000000):
            hvd.allreduce(np.ones(1, np.float32), name="step")
    except hvd.AbortedError as error:
        print(f"rank {rank}: named after {time.monotonic() - started:.1f} s: {error}", flush=True)
        time.sleep(1)  # let the other ranks report before the launcher ends the job
        sys.exit(3)  # a normal exit: lockstep must not hang in MPI_Finalize
    print(f"rank {rank}: UNEXPECTED: allreduces kept completing", flush=True)


if __name__ == "__main__":
    main()
