"""JAX benchmark: lockstep's collectives inside jax.jit, side by side.

    mpirun -np 2 python benchmarks/bench_jax.py [--quick]

1. Allreduce (float32 Sum) latency and bus bandwidth of one jitted call, against
   raw MPI_Allreduce through mpi4py on the same host buffer, and mpi4jax's
   allreduce inside jit when mpi4jax is installed. At 4 B also a jitted no-op on
   the same input: what a jitted call costs without any collective.
2. A jitted MLP training step (value_and_grad + optax SGD) whose gradients are
   averaged by hvd.DistributedOptimizer (one call, and 4 MiB buckets), against
   the same step reducing each gradient with its own call (lockstep, and mpi4jax if
   present), and without communication.
Variants alternate round by round, in a different order each round; each call is
timed on every rank and counts as long as its slowest rank took; the median and p90
over calls are reported. Prints a Markdown table; with --out rank 0 also
writes the numbers as JSON (what `make bench` collects).
"""

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from mpi4py import MPI

import lockstep.jax as hvd

try:
    import mpi4jax
except ImportError:  # optional comparator
    mpi4jax = None

COMM = MPI.COMM_WORLD
DISTRIBUTED_OPTIMIZER = "lockstep DistributedOptimizer (one grouped call)"  # the variant the target is about
SIZES = (4, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
LATENCY_SIZE = 4
# The variant names the latency target compares (summary.py reads them).
LOCKSTEP_JIT = "lockstep jit"
NO_OP_JIT = "jitted no-op (same call, no allreduce)"
MPI4JAX_JIT = "mpi4jax jit"
RAW_MPI = "MPI_Allreduce (mpi4py, host)"


def timed(fn, reps):
    """Seconds of each of `reps` calls of fn (which blocks), the slowest rank's per call."""
    COMM.Barrier()
    local = np.empty(reps)
    for index in range(reps):
        start = time.perf_counter()
        fn()
        local[index] = time.perf_counter() - start
    slowest = np.empty_like(local)
    COMM.Allreduce(local, slowest, op=MPI.MAX)
    return slowest


def allreduce_variants(size_bytes):
    count = size_bytes // 4
    x = jnp.ones(count, jnp.float32)
    host, received = np.ones(count, np.float32), np.empty(count, np.float32)
    lockstep_jit = jax.jit(lambda v: hvd.allreduce(v, op=hvd.Sum, name=f"bench.{size_bytes}"))
    variants = {
        LOCKSTEP_JIT: lambda: lockstep_jit(x).block_until_ready(),
        RAW_MPI: lambda: COMM.Allreduce(host, received, op=MPI.SUM),
    }
    if mpi4jax is not None:
        m4j = jax.jit(lambda v: mpi4jax.allreduce(v, op=MPI.SUM, comm=COMM))
        variants[MPI4JAX_JIT] = lambda: m4j(x).block_until_ready()
    if size_bytes == LATENCY_SIZE:
        # A new output from the same input, as the allreduce returns: the cost of the
        # jitted call itself, which the latency target allows on top of raw MPI.
        no_op = jax.jit(lambda v: v + 1)
        variants[NO_OP_JIT] = lambda: no_op(x).block_until_ready()
    return variants


def init_mlp(sizes):
    keys = jax.random.split(jax.random.PRNGKey(0), len(sizes) - 1)
    return [
        {"w": jax.random.normal(k, (a, b)) * 0.05, "b": jnp.zeros(b)}
        for k, (a, b) in zip(keys, zip(sizes[:-1], sizes[1:]))
    ]


def loss_fn(params, x, y):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    logits = x @ params[-1]["w"] + params[-1]["b"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def training_variants():
    params = init_mlp((784, 1024, 1024, 512, 10))
    x = jnp.asarray(np.random.default_rng(hvd.rank()).normal(size=(64, 784)).astype(np.float32))
    y = jnp.zeros(64, jnp.int32)
    sgd = optax.sgd(0.01)

    def make(reduce):
        @jax.jit
        def step(params, state):
            grads = jax.grad(loss_fn)(params, x, y)
            updates, state = sgd.update(reduce(grads), state, params)
            return optax.apply_updates(params, updates), state

        state = sgd.init(params)
        return lambda: jax.block_until_ready(step(params, state))

    one_call = hvd.DistributedOptimizer(optax.identity())
    bucketed = hvd.DistributedOptimizer(optax.identity(), bucket_bytes=4 << 20)
    n = hvd.size()
    variants = {
        DISTRIBUTED_OPTIMIZER: make(lambda g: one_call.update(g, ())[0]),
        "lockstep DistributedOptimizer, 4 MiB buckets": make(lambda g: bucketed.update(g, ())[0]),
        "lockstep, one allreduce per gradient": make(lambda g: jax.tree.map(lambda t: hvd.allreduce(t), g)),
        "no communication (reference)": make(lambda g: g),
    }
    if mpi4jax is not None:
        variants["mpi4jax, one allreduce per gradient"] = make(
            lambda g: jax.tree.map(lambda t: mpi4jax.allreduce(t, op=MPI.SUM, comm=COMM) / n, g)
        )
    return variants, sum(leaf.size * 4 for leaf in jax.tree.leaves(params))


def interleaved(variants, rounds, reps):
    """{variant: (median, p90) seconds per call}. Every round runs the variants in a
    different order (a permutation seeded by the round, the same on every rank), and
    each variant runs once untimed before its timed calls: on a loaded machine the
    variant that follows mpi4jax (whose ranks spin in sched_yield while they wait)
    measured up to 15% slower than the same step placed elsewhere."""
    for fn in variants.values():  # compile and warm up
        for _ in range(3):
            fn()
    names = list(variants)
    samples = {name: [] for name in variants}
    for round_index in range(rounds):
        for position in np.random.default_rng(round_index).permutation(len(names)):
            name = names[position]
            variants[name]()
            samples[name].extend(timed(variants[name], reps))
    return {name: (float(np.median(s)), float(np.percentile(s, 90))) for name, s in samples.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="JSON file rank 0 writes the results to")
    args = parser.parse_args()
    hvd.init()
    n = hvd.size()
    lines = [
        f"{n} ranks, jax {jax.__version__}, mpi4jax {'absent' if mpi4jax is None else mpi4jax.__version__}",
        "",
        "| size | variant | time per call | busbw GB/s |",
        "|---|---|---|---|",
    ]
    result = {
        "benchmark": "jax",
        "ranks": n,
        "mpi4jax": None if mpi4jax is None else mpi4jax.__version__,
        "allreduce": [],
        "training": [],
    }
    for size_bytes in SIZES:
        big = size_bytes >= 16 << 20
        rounds, reps = (3, 2) if args.quick else ((5, 3) if big else (7, 50))
        for name, (seconds, p90) in interleaved(allreduce_variants(size_bytes), rounds, reps).items():
            busbw = size_bytes * 2 * (n - 1) / n / seconds / 1e9
            lines.append(f"| {size_bytes} B | {name} | {seconds * 1e6:.1f} us | {busbw:.2f} |")
            result["allreduce"].append(
                {"size_bytes": size_bytes, "variant": name, "seconds": seconds, "p90_s": p90, "busbw_GBps": busbw}
            )
    variants, grad_bytes = training_variants()
    rounds, reps = (3, 2) if args.quick else (15, 10)
    lines += [
        "",
        f"Jitted MLP step (8 gradients, {grad_bytes / 2**20:.1f} MiB):",
        "",
        "| variant | ms per step |",
        "|---|---|",
    ]
    for name, (seconds, _p90) in interleaved(variants, rounds, reps).items():
        lines.append(f"| {name} | {seconds * 1e3:.2f} |")
        result["training"].append({"variant": name, "seconds": seconds, "gradient_bytes": grad_bytes})
    if hvd.rank() == 0:
        print("\n".join(lines), flush=True)
        if args.out:
            with open(args.out, "w") as stream:
                json.dump(result, stream, indent=1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
