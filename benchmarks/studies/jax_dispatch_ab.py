"""What declaring lockstep's XLA custom calls side-effecting would cost, side by side.

    mpirun -np 2 --bind-to core python benchmarks/studies/jax_dispatch_ab.py

lockstep's calls are pure to JAX (lockstep/jax/compiled_ops.py), so a jitted program
with collectives keeps JAX's C++ dispatch fast path. This job traces the same
programs a second time with `has_side_effect=True` (the declaration an earlier
version used) and times both, interleaved round by round, with a jitted no-op and
raw MPI_Allreduce as references: a 4-byte allreduce, 50 separate 1 KiB allreduces
in one program, and the same 50 as one grouped call. Each call counts as long as
its slowest rank took; prints the median and p90 over calls (us).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/

import bench_jax  # its per-call timing: the slowest rank's time per call
import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

import lockstep.jax as hvd

COMM = MPI.COMM_WORLD
ROUNDS, CALLS = 8, 50


def variants():
    one = jnp.ones(1, jnp.float32)
    many = [jnp.full(256, i, jnp.float32) for i in range(CALLS)]
    result = {}
    for label, effect in (("pure", False), ("side effect", True)):
        original = jax.ffi.ffi_call
        jax.ffi.ffi_call = lambda *a, e=effect, o=original, **k: o(*a, **k, has_side_effect=e)
        try:
            tag = label.replace(" ", "_")
            single = jax.jit(lambda v, t=tag: hvd.allreduce(v, op=hvd.Sum, name=f"ab.{t}.one"))
            separate = jax.jit(
                lambda vs, t=tag: [hvd.allreduce(v, op=hvd.Sum, name=f"ab.{t}.{i}") for i, v in enumerate(vs)]
            )
            grouped = jax.jit(lambda vs, t=tag: hvd.grouped_allreduce(vs, op=hvd.Sum, name=f"ab.{t}.group"))
            # Trace and compile while the declaration is patched in.
            jax.block_until_ready((single(one), separate(many), grouped(many)))
        finally:
            jax.ffi.ffi_call = original
        result[f"4 B allreduce, {label}"] = lambda f=single: f(one).block_until_ready()
        result[f"{CALLS} x 1 KiB separate, {label}"] = lambda f=separate: jax.block_until_ready(f(many))
        result[f"{CALLS} x 1 KiB grouped, {label}"] = lambda f=grouped: jax.block_until_ready(f(many))
    no_op = jax.jit(lambda v: v + 1)
    result["jitted no-op"] = lambda: no_op(one).block_until_ready()
    host, received = np.ones(1, np.float32), np.empty(1, np.float32)
    result["MPI_Allreduce 4 B"] = lambda: COMM.Allreduce(host, received, op=MPI.SUM)
    return result


def main():
    hvd.init()
    timed = variants()
    samples = {name: [] for name in timed}
    for _ in range(ROUNDS):
        for name, call in timed.items():
            for _ in range(5):
                call()
            samples[name].append(bench_jax.timed(call, CALLS))
    if COMM.rank == 0:
        print(f"{'variant':40s} {'median':>10s} {'p90':>10s}")
        for name, values in samples.items():
            us = np.concatenate(values) * 1e6
            print(f"{name:40s} {np.median(us):10.1f} {np.percentile(us, 90):10.1f}")
    hvd.shutdown()


if __name__ == "__main__":
    main()
