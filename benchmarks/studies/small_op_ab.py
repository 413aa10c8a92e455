"""A 4-byte synchronous allreduce (lockstep.numpy and lockstep.torch, a fixed name with
op=Sum, and the user's plain `hvd.allreduce(x)`: an automatic name, Average) against raw
MPI_Allreduce (mpi4py) in the same job, interleaved in 20 rounds of 200 ops; prints
rank 0's median and p90 of each and the CPU ticks of each thread. Run the same job
from two trees (or with LOCKSTEP_CALLER_CYCLES=0 and 1) alternately to compare:

    for tree in /work/main /work/wt-hot-path; do
      PYTHONPATH=$tree/python mpirun -np 2 --bind-to core python benchmarks/studies/small_op_ab.py $tree
    done
"""

import glob
import os
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

import lockstep.numpy as hvd
import lockstep.torch as hvd_torch


def thread_ticks():
    """CPU ticks (user + system) of this process's threads, by thread name."""
    ticks = {}
    for task in glob.glob(f"/proc/{os.getpid()}/task/*"):
        with open(task + "/comm") as stream:
            name = stream.read().strip()
        with open(task + "/stat") as stream:
            fields = stream.read().rsplit(")", 1)[1].split()
        ticks[name] = ticks.get(name, 0) + int(fields[11]) + int(fields[12])
    return ticks


def timed(op, count):
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        op()
        samples.append(time.perf_counter() - start)
    return samples


def main():
    label = sys.argv[1] if len(sys.argv) > 1 else ""
    hvd.init()
    rank = hvd.rank()
    comm = MPI.COMM_WORLD
    sent = np.ones(1, np.float32)
    received = np.empty_like(sent)
    tensor = torch.ones(1, dtype=torch.float32)
    variants = {
        "lockstep numpy": lambda: hvd.allreduce(sent, name="ab", op=hvd.Sum),
        "lockstep torch": lambda: hvd_torch.allreduce(tensor, name="ab.torch", op=hvd.Sum),
        "numpy hvd.allreduce(x)": lambda: hvd.allreduce(sent),
        "torch hvd.allreduce(x)": lambda: hvd_torch.allreduce(tensor),
    }
    samples = {variant: [] for variant in variants}
    samples["MPI_Allreduce"] = []
    for _ in range(20):
        for variant, op in variants.items():
            comm.Barrier()
            samples[variant] += timed(op, 200)
        comm.Barrier()
        samples["MPI_Allreduce"] += timed(lambda: comm.Allreduce(sent, received, op=MPI.SUM), 200)
    if rank == 0:
        for variant, seconds in samples.items():
            micros = np.array(seconds) * 1e6
            print(f"{label} {variant}: median {np.median(micros):.1f} p90 {np.percentile(micros, 90):.1f} us")
    print(f"{label} rank {rank} CPU ticks by thread: {thread_ticks()}")
    hvd.shutdown()


if __name__ == "__main__":
    main()
