"""Out-of-place numpy allreduce (a fresh result each call) against in place and
against mpi4py into a fresh array, interleaved per size; prints rank 0's medians.
Shows what recycling result buffers (docs/PERFORMANCE.md, "Result buffers") saves:

    mpirun -np 2 --bind-to core .venv/bin/python benchmarks/studies/result_buffers.py
    LOCKSTEP_HOST_BUFFER_CACHE_BYTES=0 mpirun -np 2 --bind-to core .venv/bin/python benchmarks/studies/result_buffers.py
"""

import time

import numpy as np
from mpi4py import MPI

import lockstep.numpy as hvd

SIZES = [256 << 10, 1 << 20, 4 << 20, 64 << 20, 256 << 20]


def median_seconds(op, count):
    for _ in range(2):
        op()
    MPI.COMM_WORLD.Barrier()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        op()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))


def main():
    hvd.init()
    comm = MPI.COMM_WORLD
    for size in SIZES:
        count = 40 if size <= 4 << 20 else 6
        sent = np.ones(size // 4, np.float32)
        in_place = sent.copy()
        variants = {
            "allreduce": lambda: hvd.allreduce(sent, op=hvd.Sum, name=f"fresh.{size}"),
            "allreduce_": lambda: hvd.allreduce_(in_place, op=hvd.Sum, name=f"inplace.{size}"),
            "mpi4py, fresh output": lambda: comm.Allreduce(sent, np.empty_like(sent), op=MPI.SUM),
        }
        row = {name: median_seconds(op, count) * 1e6 for name, op in variants.items()}
        if comm.rank == 0:
            cells = ", ".join(f"{name} {micros:.0f} us" for name, micros in row.items())
            print(f"{size >> 10} KiB: {cells}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
