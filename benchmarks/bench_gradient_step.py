"""Benchmark 3: allreducing ResNet-50's 161 gradient tensors (97.5 MiB) per step.

lockstep submits every tensor asynchronously under a stable name, then waits for
all: through the numpy frontend (new output arrays, and in place) and through the
PyTorch frontend in place (as DistributedOptimizer does). Comparators: raw MPI with one
blocking call per tensor, one nonblocking call per tensor then Waitall, one call
on a pre-concatenated buffer, and torch.distributed gloo with one async call per
tensor. Steps are interleaved strategy by strategy, with no untimed warm-up: the
first step (for lockstep, the one that negotiates every name in full and fills
the response cache) is reported apart from the steady state of the steps after it.
"""

import gradient_set
import harness
import numpy as np


def add_arguments(parser):
    parser.add_argument("--steps", type=int, default=20, help="steady-state steps after the first")


def make_variants(ctx, with_lockstep_torch):
    gradients = gradient_set.numpy_gradients()
    in_place = gradient_set.torch_gradients()
    variants = {
        "lockstep numpy": gradient_set.lockstep_numpy_step(gradients),
        # Its own arrays: reducing in place changes them every step.
        "lockstep numpy (in place)": gradient_set.lockstep_numpy_in_place_step(gradient_set.numpy_gradients()),
    }
    if with_lockstep_torch:
        variants["lockstep torch (in place)"] = gradient_set.lockstep_torch_step(in_place)
    variants["MPI per tensor"] = gradient_set.mpi_blocking_step(ctx.comm, gradients)
    variants["MPI per tensor, nonblocking"] = gradient_set.mpi_nonblocking_step(ctx.comm, gradients)
    variants["MPI one concatenated buffer"] = gradient_set.mpi_concatenated_step(ctx.comm, gradients)
    variants["torch.distributed gloo"] = gradient_set.gloo_step(in_place)
    return variants, gradient_set.total_bytes(gradients), len(gradients)


def step_row(variant, seconds):
    steady = seconds[1:]
    row = dict(harness.summarize(steady), variant=variant, first_step_s=float(seconds[0]))
    return row


def run(args, ctx):
    with_torch = harness.lockstep_torch_available(ctx)
    variants, nbytes, count = make_variants(ctx, with_torch)
    steps = 3 if args.quick else args.steps
    ctx.log(f"{count} tensors, {nbytes / 2**20:.1f} MiB, {steps} steady steps after the first")
    samples = harness.run_interleaved(ctx, variants, rounds=steps + 1, reps=1, warmup=0)
    rows = [step_row(name, seconds) for name, seconds in samples.items()]
    for row in rows:
        ctx.log(
            f"{row['variant']}: first {row['first_step_s'] * 1e3:.1f} ms, "
            f"steady median {row['median_s'] * 1e3:.1f} ms (p90 {row['p90_s'] * 1e3:.1f})"
        )
    ctx.write_json(
        args.out,
        {
            "benchmark": "gradient_step",
            "tensors": count,
            "bytes": nbytes,
            "steady_steps": steps,
            "rows": rows,
            "raw_steps_s": {name: np.asarray(s).tolist() for name, s in samples.items()},
        },
    )


def main():
    harness.main_with_gloo(__doc__, run, add_arguments)


if __name__ == "__main__":
    main()
