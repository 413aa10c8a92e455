"""Rank 1 dies mid-run (os._exit without MPI_Finalize) while the others wait in a
collective; mpirun must end the whole job with a non-zero status, not hang."""

import os
import sys
import threading
import time

import numpy as np
from rank_checks import run_main

import lockstep.numpy as hvd


def die_mid_large_allreduces(rank):
    """Rank 1 dies at an arbitrary point of a stream of 4 MiB allreduces, which on 3+
    ranks run through the shared-memory path's barriers."""
    data = np.ones(1 << 20, np.float32)
    hvd.allreduce(data, name="large.0", op=hvd.Sum)
    print(f"rank {rank}: first allreduce done", flush=True)
    if rank == 1:
        threading.Timer(0.5, os._exit, args=(1,)).start()
    for step in range(1, 100000):
        hvd.allreduce(data, name=f"large.{step % 8}", op=hvd.Sum)
    print(f"rank {rank}: UNEXPECTED: 100000 allreduces completed", flush=True)


def main():
    hvd.init()
    rank = hvd.rank()
    if sys.argv[1:] == ["large"]:
        die_mid_large_allreduces(rank)
        return
    hvd.allreduce(np.ones(4, np.float32), name="before.death")
    print(f"rank {rank}: first allreduce done", flush=True)
    if rank == 1:
        time.sleep(1.0)  # let the others report and block in the next collective first
        os._exit(1)
    hvd.allreduce(np.ones(4, np.float32), name="after.death")  # can never complete
    print(f"rank {rank}: UNEXPECTED: the collective completed without rank 1", flush=True)


if __name__ == "__main__":
    run_main(main)
