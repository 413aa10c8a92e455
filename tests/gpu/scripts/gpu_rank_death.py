"""Rank 1 dies (os._exit, no MPI_Finalize) in the middle of a stream of 4 MiB GPU
allreduces. The job must end or the surviving ranks must fail with an error, within
the test's timeout; it must never hang and never complete all the allreduces."""

import os
import threading
import time

import torch
from gpu_checks import start
from rank_checks import run_main

import lockstep.torch as hvd


def main():
    rank, size, device = start()
    data = torch.ones(1 << 20, device=device)
    hvd.allreduce_(data, name="large.0", op=hvd.Average)
    torch.cuda.synchronize()
    print(f"rank {rank}: first allreduce done", flush=True)
    if rank == 1:
        threading.Timer(0.5, os._exit, args=(1,)).start()
    started = time.monotonic()
    try:
        for step in range(1, 100000):
            hvd.allreduce_(data, name=f"large.{step % 8}", op=hvd.Average)
            if step % 16 == 0:
                torch.cuda.synchronize()  # keep the queue short, so a hang shows on the host
        torch.cuda.synchronize()
    except hvd.LockstepError as error:
        print(f"rank {rank}: failed after {time.monotonic() - started:.1f} s as expected: {error}", flush=True)
        os._exit(3)
    print(f"rank {rank}: UNEXPECTED: 100000 allreduces completed", flush=True)


if __name__ == "__main__":
    run_main(main)
