"""Benchmark 8: the ResNet-50 gradient step with default settings or LOCKSTEP_AUTOTUNE=1.

Settings are process-wide, so the two cannot share a job: the driver alternates
launches of each (see run_all.py) and this script times one. It reduces the 161
gradient tensors in place through the numpy frontend for --tune-steps steps (long
enough for the tuner to finish with its default windows), then times --steps steady
steps. With LOCKSTEP_AUTOTUNE_LOG set, the tuner's windows and its choice are in that
CSV.
"""

import os

import gradient_set
import harness
import numpy as np


def add_arguments(parser):
    parser.add_argument("--tune-steps", type=int, default=150, help="untimed steps first (the tuning)")
    parser.add_argument("--steps", type=int, default=30, help="timed steady-state steps")


def run(args, ctx):
    step = gradient_set.lockstep_numpy_in_place_step(gradient_set.numpy_gradients())
    tune_steps, steps = (40, 5) if args.quick else (args.tune_steps, args.steps)
    for _ in range(tune_steps):
        step()
    samples = harness.run_interleaved(ctx, {"step": step}, rounds=steps, reps=1, warmup=0)["step"]
    autotune = os.environ.get("LOCKSTEP_AUTOTUNE") == "1"
    row = dict(harness.summarize(samples), variant="autotuned" if autotune else "default settings")
    ctx.log(f"{row['variant']}: steady median {row['median_s'] * 1e3:.1f} ms after {tune_steps} steps")
    ctx.write_json(
        args.out,
        {
            "benchmark": "autotune",
            "tune_steps": tune_steps,
            "steps": steps,
            "rows": [row],
            "raw_steps_s": np.asarray(samples).tolist(),
        },
    )


def main():
    args = harness.parse_args(__doc__, add_arguments)
    ctx = harness.BenchContext()
    with harness.lockstep_running():
        run(args, ctx)


if __name__ == "__main__":
    main()
