"""Benchmark 1: latency of one small float32 allreduce at a time.

Sizes 4 B, 1 KiB and 64 KiB. Variants, interleaved round by round on the same
buffers: lockstep through the numpy and the PyTorch frontends (a fixed name, so
the response cache's fast path is what gets measured), raw MPI_Allreduce through
mpi4py, and torch.distributed with gloo. All reduce with Sum, so every variant
does the same arithmetic. Reported: median and p90 over ops of the slowest rank.

Then every rank sleeps for a while and lockstep's background thread ("lockstep-bg")
is metered: its share of a core and its wake-ups per second while the job is idle.
`--idle-only` skips the timed ops (a few untimed ones warm the engine up first);
`make bench` uses it for the idle measurement at 3 ranks.
"""

import time

import harness
import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI
from thread_cpu import ThreadMeter

SIZES_BYTES = (4, 1024, 64 * 1024)
IDLE_SECONDS, QUICK_IDLE_SECONDS = 10.0, 2.0


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


def add_arguments(parser):
    parser.add_argument("--idle-only", action="store_true", help="only the idle background-thread measurement")


def main():
    harness.main_with_gloo(__doc__, run, add_arguments)


def run(args, ctx):
    rounds, reps = (5, 20) if args.quick else (30, 100)
    if args.idle_only:
        rows = []
        _warm_up(ctx)
    else:
        rows = _latency_rows(ctx, rounds, reps)
    idle = measure_idle(ctx, QUICK_IDLE_SECONDS if args.quick else IDLE_SECONDS)
    ctx.write_json(args.out, {"benchmark": "latency", "rounds": rounds, "reps": reps, "rows": rows, "idle": idle})


def _latency_rows(ctx, rounds, reps):
    with_torch = harness.lockstep_torch_available(ctx)
    rows = []
    for size_bytes in SIZES_BYTES:
        samples = harness.run_interleaved(ctx, make_variants(ctx, size_bytes, with_torch), rounds, reps, warmup=20)
        for variant, seconds in samples.items():
            rows.append(dict(harness.summarize(seconds, reps), size_bytes=size_bytes, variant=variant))
        ctx.log(_progress_line(size_bytes, samples))
    return rows


def _warm_up(ctx, ops=200):
    """Cached small ops, so the idle engine is in the state a job leaves it in after work."""
    import lockstep.numpy as ls_numpy

    array = np.ones(1, np.float32)
    for _ in range(ops):
        ls_numpy.allreduce(array, name="latency.idle.warmup", op=ls_numpy.Sum)


def measure_idle(ctx, seconds):
    """Every rank sleeps for `seconds` while its background thread is metered.

    Returns {"seconds", "core_fraction": [per rank], "wakeups_per_s": [per rank]};
    the lists hold None on a rank where the thread was not found.
    """
    ctx.barrier()  # all ranks idle at once: a peer's work would wake this rank's thread
    meter = ThreadMeter("lockstep-bg")
    with meter:
        time.sleep(seconds)
    found = meter.tid is not None and meter.wall_s > 0
    local = (meter.cpu_ns / 1e9 / meter.wall_s, meter.scheduled / meter.wall_s) if found else (None, None)
    per_rank = ctx.comm.gather(local, root=0) or []
    idle = {
        "seconds": seconds,
        "core_fraction": [fraction for fraction, _ in per_rank],
        "wakeups_per_s": [wakeups for _, wakeups in per_rank],
    }
    ctx.log(
        f"idle {seconds:g} s: background thread "
        + ", ".join("-" if f is None else f"{f * 100:.2f}% of a core, {w:.0f} wake-ups/s" for f, w in per_rank)
    )
    return idle


def _progress_line(size_bytes, samples):
    medians = ", ".join(f"{name} {np.median(s) * 1e6:.1f} us" for name, s in samples.items())
    return f"{size_bytes} B: {medians}"


if __name__ == "__main__":
    main()
