"""Rank 1 dies mid-run (os._exit without MPI_Finalize) while the others wait in a
collective; mpirun must end the whole job with a non-zero status, not hang."""

import os
import time

import numpy as np

import lockstep.numpy as hvd
from rank_checks import run_main


def main():
    hvd.init()
    rank = hvd.rank()
    hvd.allreduce(np.ones(4, np.float32), name="before.death")
    print(f"rank {rank}: first allreduce done", flush=True)
    if rank == 1:
        time.sleep(1.0)  # let the others report and block in the next collective first
        os._exit(1)
    hvd.allreduce(np.ones(4, np.float32), name="after.death")  # can never complete
    print(f"rank {rank}: UNEXPECTED: the collective completed without rank 1", flush=True)


if __name__ == "__main__":
    run_main(main)
