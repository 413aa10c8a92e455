"""Benchmark 6: lockstep's shared-memory allreduce against its MPI path.

The "beyond" experiment of the performance issue: on one host, reduce allreduce
chunks through a shared-memory window instead of MPI_Allreduce, and keep that only
where it measures faster. The same job alternates lockstep with the shared-memory
path switched on (LOCKSTEP_SHM_ALLREDUCE=on) and off, init() after shutdown(), so
both run side by side; raw MPI_Allreduce (mpi4py, one call) runs in every round too.
In-place float32 allreduces of 64 KiB-64 MiB (lockstep reduces them in 1 MiB chunks).
The driver runs it at 2 ranks and at 3 (oversubscribed on 2 cores).
"""

import os

import harness
import numpy as np
from mpi4py import MPI

KIB = 1 << 10
MIB = 1 << 20
SIZES = (64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB)


def reps_for(size, reps):
    """Small sizes take more ops per round, so that each round lasts about as long."""
    return reps * max(1, MIB // size)


MODES = {"lockstep, shared memory": "on", "lockstep, MPI": "off"}
RAW_MPI = "MPI_Allreduce (mpi4py)"


def run(args, ctx):
    import lockstep
    import lockstep.numpy as ls

    rounds, reps = (2, 2) if args.quick else (6, 5)
    arrays = {size: np.zeros(size // 4, np.float32) for size in SIZES}
    received = {size: np.zeros_like(array) for size, array in arrays.items()}
    seconds = {(variant, size): [] for variant in (*MODES, RAW_MPI) for size in SIZES}
    for round_index in range(rounds):
        order = list(MODES.items()) if round_index % 2 == 0 else list(MODES.items())[::-1]
        for variant, mode in order:
            os.environ["LOCKSTEP_SHM_ALLREDUCE"] = mode
            lockstep.init()
            try:
                for size, array in arrays.items():
                    ls.allreduce_(array, name=f"shm.{size}", op=ls.Sum)  # negotiates the name once
                    seconds[(variant, size)] += harness.run_interleaved(
                        ctx,
                        {variant: lambda: ls.allreduce_(array, name=f"shm.{size}", op=ls.Sum)},
                        1,
                        reps_for(size, reps),
                        0,
                    )[variant].tolist()
            finally:
                lockstep.shutdown()
        for size, array in arrays.items():
            seconds[(RAW_MPI, size)] += harness.run_interleaved(
                ctx,
                {RAW_MPI: lambda: ctx.comm.Allreduce(array, received[size], op=MPI.SUM)},
                1,
                reps_for(size, reps),
                0,
            )[RAW_MPI].tolist()
    rows = []
    for (variant, size), values in seconds.items():
        row = dict(harness.summarize(values), variant=variant, size_bytes=size)
        row["busbw_GBps"] = size / row["median_s"] * 2 * (ctx.size - 1) / ctx.size / 1e9
        rows.append(row)
    for size in SIZES:
        ctx.log(
            f"{ctx.size} ranks, {size // KIB} KiB busbw: "
            + ", ".join(f"{row['variant']} {row['busbw_GBps']:.2f} GB/s" for row in rows if row["size_bytes"] == size)
        )
    ctx.write_json(args.out, {"benchmark": "shm", "rounds": rounds, "reps": reps, "rows": rows})


def main():
    args = harness.parse_args(__doc__)
    ctx = harness.BenchContext()
    run(args, ctx)


if __name__ == "__main__":
    main()
