"""Benchmark 5: peak resident memory lockstep adds during ResNet-50's gradient step.

The driver runs this once per fusion threshold (LOCKSTEP_FUSION_THRESHOLD, read
at init). The 161 gradient tensors are allocated and touched first. Then, with
the peak RSS reset before each phase: a few raw-MPI steps in place (one call per
tensor, then one call on a concatenated copy: what MPI itself needs for small and
for fully fused messages) and a few lockstep steps through the PyTorch
frontend in place (no output tensors, so all growth is lockstep's and the MPI
calls it makes). Overhead = peak RSS during the phase - RSS before it, the
largest over ranks. Steady-state step times come along for the plot.
"""

import os
import time

import gradient_set
import harness
import numpy as np
from memory_probe import PeakOverhead
from mpi4py import MPI

MPI_STEPS = 3
LOCKSTEP_STEPS = 9


def mpi_in_place_step(comm, gradients):
    views = [tensor.numpy() for _, tensor in gradients]  # share the tensors' memory

    def step():
        for view in views:
            comm.Allreduce(MPI.IN_PLACE, view, op=MPI.SUM)

    return step


def mpi_concatenated_in_place_step(comm, gradients):
    packed = np.empty(sum(tensor.numel() for _, tensor in gradients), np.float32)
    packed.fill(0.0)  # resident before the baseline, like the gradients

    def step():
        comm.Allreduce(MPI.IN_PLACE, packed, op=MPI.SUM)

    return step


def timed_steps(ctx, step, count):
    seconds = []
    for _ in range(count):
        ctx.barrier()
        start = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - start)
    return ctx.slowest(seconds)


def run(args, ctx):
    if not harness.lockstep_torch_available(ctx):
        raise SystemExit("bench_memory needs lockstep.torch")
    gradients = gradient_set.torch_gradients()
    for _, tensor in gradients:
        tensor.fill_(0.0)  # make every page resident before the baseline
    concatenated_step = mpi_concatenated_in_place_step(ctx.comm, gradients)
    with PeakOverhead() as mpi_probe:
        timed_steps(ctx, mpi_in_place_step(ctx.comm, gradients), MPI_STEPS)
    with PeakOverhead() as concatenated_probe:
        timed_steps(ctx, concatenated_step, MPI_STEPS)
    with PeakOverhead() as lockstep_probe:
        seconds = timed_steps(ctx, gradient_set.lockstep_torch_step(gradients), LOCKSTEP_STEPS)
    row = {
        "fusion_threshold_bytes": _env_int("LOCKSTEP_FUSION_THRESHOLD"),
        "chunk_bytes": _env_int("LOCKSTEP_CHUNK_BYTES"),
        "mpi_peak_overhead_bytes": ctx.max_over_ranks(mpi_probe.bytes),
        "mpi_concatenated_peak_overhead_bytes": ctx.max_over_ranks(concatenated_probe.bytes),
        "lockstep_peak_overhead_bytes": ctx.max_over_ranks(lockstep_probe.bytes),
        "first_step_s": float(seconds[0]),
        "steady_step_median_s": float(np.median(seconds[1:])),
        "gradient_bytes": gradient_set.total_bytes(gradients),
    }
    ctx.log(
        f"fusion threshold {row['fusion_threshold_bytes']}, chunk {row['chunk_bytes']}: "
        f"lockstep +{row['lockstep_peak_overhead_bytes'] / 2**20:.1f} MiB, "
        f"raw MPI +{row['mpi_peak_overhead_bytes'] / 2**20:.1f} MiB, "
        f"step {row['steady_step_median_s'] * 1e3:.1f} ms"
    )
    ctx.write_json(args.out, {"benchmark": "memory", "rows": [row]})


def _env_int(name):
    """The setting as the job was given it; None when unset (the core's default applies)."""
    value = os.environ.get(name)
    return None if value is None else int(value)


def main():
    args = harness.parse_args(__doc__)
    ctx = harness.BenchContext()
    harness.limit_torch_threads()
    with harness.lockstep_running():
        run(args, ctx)


if __name__ == "__main__":
    main()
