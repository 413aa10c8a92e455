"""What every benchmark process shares: its MPI side, interleaved timing, output.

Each benchmark runs under mpirun. mpi4py is imported (and so MPI initialized, with
MPI_THREAD_MULTIPLE) before lockstep.init(), which then adopts MPI. Barriers and
result gathering use a private duplicate of COMM_WORLD so they never touch the
communicator lockstep negotiates on; raw-MPI comparators use that duplicate too.
"""

import argparse
import contextlib
import json
import os
import time

import numpy as np
from mpi4py import MPI


def parse_args(description, add_arguments=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", required=True, help="JSON file rank 0 writes the results to")
    parser.add_argument("--quick", action="store_true", help="few repetitions, for a smoke test")
    if add_arguments is not None:
        add_arguments(parser)
    return parser.parse_args()


class BenchContext:
    """One benchmark process's view of the job."""

    def __init__(self):
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()

    def barrier(self):
        self.comm.Barrier()

    def slowest(self, seconds):
        """Per iteration, the time of the slowest rank (an op is done when all are)."""
        local = np.ascontiguousarray(seconds, dtype=np.float64)
        result = np.empty_like(local)
        self.comm.Allreduce(local, result, op=MPI.MAX)
        return result

    def max_over_ranks(self, value):
        return self.comm.allreduce(value, op=MPI.MAX)

    def log(self, message):
        """Progress on rank 0 only, flushed so the driver shows it as it happens."""
        if self.rank == 0:
            print(f"    {message}", flush=True)

    def write_json(self, path, payload):
        if self.rank != 0:
            return
        payload = dict(payload, ranks=self.size, written=time.strftime("%Y-%m-%d %H:%M:%S"))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as stream:
            json.dump(payload, stream, indent=1)


def run_interleaved(ctx, variants, rounds, reps, warmup=2):
    """Time `variants` ({name: callable doing one op}) side by side.

    Every variant first runs `warmup` untimed ops. Then, round by round, each
    variant runs `reps` ops timed one by one, after a barrier so all ranks start
    together; the variant order rotates every round, so none always goes first
    after a barrier or always follows the same neighbour. Returns {name: array of
    the slowest rank's seconds per op}.
    """
    names = list(variants)
    for name in names:
        for _ in range(warmup):
            variants[name]()
    samples = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].extend(_timed(ctx, variants[name], reps))
    return {name: ctx.slowest(samples[name]) for name in names}


def _timed(ctx, operation, reps):
    ctx.barrier()
    seconds = []
    for _ in range(reps):
        start = time.perf_counter()
        operation()
        seconds.append(time.perf_counter() - start)
    return seconds


def summarize(seconds, round_size=None):
    """Median, p90, min and mean of a sample of durations, in seconds.

    With `round_size` (ops per round, as run_interleaved recorded them) also the
    median of the quietest round: other work on a shared machine comes and goes,
    and this shows what the code does when it is left alone.
    """
    seconds = np.asarray(seconds, dtype=np.float64)
    summary = {
        "median_s": float(np.median(seconds)),
        "p90_s": float(np.percentile(seconds, 90)),
        "min_s": float(np.min(seconds)),
        "mean_s": float(np.mean(seconds)),
        "samples": int(seconds.size),
    }
    if round_size:
        rounds = seconds[: seconds.size - seconds.size % round_size].reshape(-1, round_size)
        summary["best_round_median_s"] = float(np.min(np.median(rounds, axis=1)))
    return summary


@contextlib.contextmanager
def lockstep_running():
    """lockstep initialized for the block and shut down after it, even on errors.

    mpi4py finalizes MPI from a Python atexit hook, which runs before lockstep's C
    atexit hook; shutting down explicitly keeps the background thread from making
    MPI calls after MPI_Finalize.
    """
    import lockstep

    lockstep.init()
    try:
        yield
    finally:
        lockstep.shutdown()


def limit_torch_threads():
    """One intra-op and one inter-op thread per rank: two ranks share two cores."""
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set, or parallel work already started
        pass


REQUIRED_TORCH_API = ("init", "allreduce", "allreduce_async_", "synchronize", "DistributedOptimizer")


def lockstep_torch_available(ctx):
    """True on every rank once the PyTorch frontend imports on every rank.

    The frontend is optional for the numpy-only measurements, so a failing import
    is reported and skipped rather than fatal.
    """
    try:
        import lockstep.torch as ls_torch

        missing = [name for name in REQUIRED_TORCH_API if not hasattr(ls_torch, name)]
        if missing:
            raise ImportError(f"lockstep.torch lacks {', '.join(missing)}")
        available = True
    except Exception as error:  # a half-installed frontend can fail in many ways
        ctx.log(f"lockstep.torch unavailable, skipping its variants: {error!r}")
        available = False
    return bool(ctx.comm.allreduce(int(available), op=MPI.MIN))


def main_with_gloo(description, run, add_arguments=None):
    """The shared entry point of the benchmarks that compare against gloo: parse the
    arguments, start lockstep and a gloo group, run, and tear both down."""
    from gloo_group import init_gloo, shutdown_gloo  # torch is imported only when needed

    args = parse_args(description, add_arguments)
    ctx = BenchContext()
    limit_torch_threads()
    with lockstep_running():
        init_gloo(ctx)
        try:
            run(args, ctx)
        finally:
            shutdown_gloo()
