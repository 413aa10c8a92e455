"""Benchmark 1: latency of one small float32 allreduce at a time.

Sizes 4 B, 1 KiB and 64 KiB. Variants, interleaved round by round on the same
buffers: lockstep through the numpy and the PyTorch frontends (a fixed name, so
the response cache's fast path is what gets measured), raw MPI_Allreduce through
mpi4py, and torch.distributed with gloo. All reduce with Sum, so every variant
does the same arithmetic. Reported: median and p90 over ops of the slowest rank.
"""

import harness
import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

SIZES_BYTES = (4, 1024, 64 * 1024)


def make_variants(ctx, size_bytes, with_lockstep_torch):
    import lockstep.numpy as ls_numpy

    count = size_bytes // 4
    array = np.ones(count, np.float32)
    received = np.empty_like(array)
    gloo_tensor = torch.zeros(count, dtype=torch.float32)  # zeros: in place, Sum must not overflow
    name = f"latency.{size_bytes}"
    variants = {
        "lockstep numpy": lambda: ls_numpy.allreduce(array, name=name, op=ls_numpy.Sum),
    }
    if with_lockstep_torch:
        import lockstep.torch as ls_torch

        tensor = torch.ones(count, dtype=torch.float32)
        variants["lockstep torch"] = lambda: ls_torch.allreduce(tensor, name=name + ".torch", op=ls_torch.Sum)
    variants["MPI_Allreduce (mpi4py)"] = lambda: ctx.comm.Allreduce(array, received, op=MPI.SUM)
    variants["torch.distributed gloo"] = lambda: dist.all_reduce(gloo_tensor)
    return variants


def main():
    harness.main_with_gloo(__doc__, run)


def run(args, ctx):
    with_torch = harness.lockstep_torch_available(ctx)
    rounds, reps = (5, 20) if args.quick else (30, 100)
    rows = []
    for size_bytes in SIZES_BYTES:
        samples = harness.run_interleaved(ctx, make_variants(ctx, size_bytes, with_torch), rounds, reps, warmup=20)
        for variant, seconds in samples.items():
            rows.append(dict(harness.summarize(seconds, reps), size_bytes=size_bytes, variant=variant))
        ctx.log(_progress_line(size_bytes, samples))
    ctx.write_json(args.out, {"benchmark": "latency", "rounds": rounds, "reps": reps, "rows": rows})


def _progress_line(size_bytes, samples):
    medians = ", ".join(f"{name} {np.median(s) * 1e6:.1f} us" for name, s in samples.items())
    return f"{size_bytes} B: {medians}"


if __name__ == "__main__":
    main()
