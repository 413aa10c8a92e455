"""Benchmark 2: bandwidth of one large float32 allreduce at a time.

Sizes 1 to 256 MiB. Variants, interleaved round by round: lockstep's numpy
frontend (returns a new array, as its API does) and its PyTorch frontend in place
(`allreduce_`), raw MPI_Allreduce through mpi4py reading the same input array as
the numpy frontend into a preallocated output, and torch.distributed gloo in
place. All reduce with Sum; the in-place buffers hold zeros so repeated sums stay
finite. Reported from the median time of the slowest rank: algbw = bytes / time
and busbw = algbw * 2(n-1)/n, as nccl-tests defines them.
"""

import gc

import harness
import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

MIB = 1 << 20
# From 64 KiB, where the many-core bandwidth target starts, to 256 MiB.
SIZES = (64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20)
# Each variant moves about this many bytes per size: enough ops to see the
# distribution at small sizes without making 256 MiB take minutes.
BYTES_PER_VARIANT = 1 << 30
MIN_OPS, MAX_OPS = 6, 400


def op_counts(size_bytes, quick):
    """(rounds, reps per round) for one size."""
    if quick:
        return 2, 2
    ops = int(np.clip(BYTES_PER_VARIANT // size_bytes, MIN_OPS, MAX_OPS))
    rounds = min(10, ops // 2)
    return rounds, max(1, ops // rounds)


def make_variants(ctx, size_bytes, with_lockstep_torch):
    import lockstep.numpy as ls_numpy

    count = size_bytes // 4
    array = np.ones(count, np.float32)
    received = np.empty_like(array)
    received.fill(0)  # touch the pages now, as a long-lived buffer would have them
    in_place = torch.zeros(count, dtype=torch.float32)
    name = f"bandwidth.{size_bytes}"
    variants = {"lockstep numpy": lambda: ls_numpy.allreduce(array, name=name, op=ls_numpy.Sum)}
    if with_lockstep_torch:
        import lockstep.torch as ls_torch

        variants["lockstep torch (in place)"] = lambda: ls_torch.allreduce_(in_place, name=name + ".t", op=ls_torch.Sum)
    variants["MPI_Allreduce (mpi4py)"] = lambda: ctx.comm.Allreduce(array, received, op=MPI.SUM)
    variants["torch.distributed gloo"] = lambda: dist.all_reduce(in_place)
    return variants


def bandwidth_row(ctx, size_bytes, variant, seconds):
    row = dict(harness.summarize(seconds), size_bytes=size_bytes, variant=variant)
    algbw = size_bytes / row["median_s"]
    row["algbw_GBps"] = algbw / 1e9
    row["busbw_GBps"] = algbw * 2 * (ctx.size - 1) / ctx.size / 1e9
    return row


def run(args, ctx):
    with_torch = harness.lockstep_torch_available(ctx)
    rows = []
    for size_bytes in SIZES:
        rounds, reps = op_counts(size_bytes, args.quick)
        variants = make_variants(ctx, size_bytes, with_torch)
        samples = harness.run_interleaved(ctx, variants, rounds, reps, warmup=1)
        new_rows = [bandwidth_row(ctx, size_bytes, name, seconds) for name, seconds in samples.items()]
        rows += new_rows
        ctx.log(
            f"{size_bytes / MIB:g} MiB: " + ", ".join(f"{r['variant']} {r['busbw_GBps']:.2f} GB/s" for r in new_rows)
        )
        del variants, samples
        gc.collect()  # release this size's buffers before allocating the next
    ctx.write_json(args.out, {"benchmark": "bandwidth", "rows": rows})


def main():
    harness.main_with_gloo(__doc__, run)


if __name__ == "__main__":
    main()
