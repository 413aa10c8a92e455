"""Benchmark 6: lockstep's shared-memory allreduce against its MPI path.

The "beyond" experiment of the performance issue: on one host, reduce allreduce
chunks through a shared-memory window instead of MPI_Allreduce, and keep that only
where it measures faster. The same job alternates lockstep with the shared-memory
path switched on (LOCKSTEP_SHM_ALLREDUCE=on) and off, init() after shutdown(), so
both run side by side; raw MPI_Allreduce (mpi4py, one call) runs in every round too.
In-place float32 allreduces of 1-64 MiB (lockstep reduces them in 1 MiB chunks).
The driver runs it at 2 ranks and at 3 (oversubscribed on 2 cores).
"""

import os

import harness
import numpy as np
from mpi4py import MPI

MIB = 1 << 20
SIZES_MIB = (1, 4, 16, 64)
MODES = {"lockstep, shared memory": "on", "lockstep, MPI": "off"}
RAW_MPI = "MPI_Allreduce (mpi4py)"


def run(args, ctx):
    import lockstep
    import lockstep.numpy as ls

    rounds, reps = (2, 2) if args.quick else (6, 5)
    arrays = {mib: np.zeros(mib * MIB // 4, np.float32) for mib in SIZES_MIB}
    received = {mib: np.zeros_like(array) for mib, array in arrays.items()}
    seconds = {(variant, mib): [] for variant in (*MODES, RAW_MPI) for mib in SIZES_MIB}
    for round_index in range(rounds):
        order = list(MODES.items()) if round_index % 2 == 0 else list(MODES.items())[::-1]
        for variant, mode in order:
            os.environ["LOCKSTEP_SHM_ALLREDUCE"] = mode
            lockstep.init()
            try:
                for mib, array in arrays.items():
                    ls.allreduce_(array, name=f"shm.{mib}", op=ls.Sum)  # negotiates the name once
                    seconds[(variant, mib)] += harness.run_interleaved(
                        ctx, {variant: lambda: ls.allreduce_(array, name=f"shm.{mib}", op=ls.Sum)}, 1, reps, 0
                    )[variant].tolist()
            finally:
                lockstep.shutdown()
        for mib, array in arrays.items():
            seconds[(RAW_MPI, mib)] += harness.run_interleaved(
                ctx, {RAW_MPI: lambda: ctx.comm.Allreduce(array, received[mib], op=MPI.SUM)}, 1, reps, 0
            )[RAW_MPI].tolist()
    rows = []
    for (variant, mib), values in seconds.items():
        row = dict(harness.summarize(values), variant=variant, size_bytes=mib * MIB)
        row["busbw_GBps"] = mib * MIB / row["median_s"] * 2 * (ctx.size - 1) / ctx.size / 1e9
        rows.append(row)
    for mib in SIZES_MIB:
        ctx.log(
            f"{ctx.size} ranks, {mib} MiB busbw: "
            + ", ".join(
                f"{row['variant']} {row['busbw_GBps']:.2f} GB/s" for row in rows if row["size_bytes"] == mib * MIB
            )
        )
    ctx.write_json(args.out, {"benchmark": "shm", "rounds": rounds, "reps": reps, "rows": rows})


def main():
    args = harness.parse_args(__doc__)
    ctx = harness.BenchContext()
    run(args, ctx)


if __name__ == "__main__":
    main()
