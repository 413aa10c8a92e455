"""TensorFlow's own floor for a custom op inside tf.function, next to lockstep's allreduce.

How much of a tf.function 4-byte allreduce's cost above the same function without
it (bench_tensorflow.py) is TensorFlow's kernel machinery, which any library's op
pays, and how much is lockstep's? Every variant is a tf.function taking one
float32[1] and fetched with .numpy(), as bench_tensorflow.py times them:

- no-op: bench_tensorflow.py's `tf.identity` function;
- sync: a plain OpKernel copying its input (benchmarks/studies/tf_floor_ops.cc);
- async inline: an AsyncOpKernel calling `done` inside ComputeAsync;
- async thread (condvar / spin): an AsyncOpKernel handing `done` to one long-lived
  worker thread that calls it, as lockstep's background thread does; the worker
  sleeps on a condition variable, or busy-waits (only while that variant runs);
- unless --no-lockstep (these need MPI): lockstep's allreduce (Average, as
  bench_tensorflow.py), a raw 4-byte MPI_Allreduce through mpi4py, and the least
  any library's collective could cost inside tf.function: a sync OpKernel calling
  MPI_Allreduce in Compute (blocking TensorFlow's thread), an AsyncOpKernel calling
  it and then `done` inside ComputeAsync (the floor of an asynchronous collective),
  and an AsyncOpKernel whose worker thread calls MPI_Allreduce and then `done`;
  also lockstep.numpy's 4-byte allreduce (Sum), the same core op without
  TensorFlow (run the job with
  LOCKSTEP_CALLER_CYCLES=0 to see it handed to the background thread and back, as
  the TensorFlow kernel's op always is).

--footprint adds inline async kernels that spin for --spin-us, or write one byte per
cache line of the same --touch-kb KiB, before calling `done`: what a kernel's time and
its footprint in the caches cost TensorFlow's work around it.

--extras adds: no-op with jit_compile=False and True, the functions called through
their concrete function, the async-thread op pinned to the CPU device inside the
function, and no-op / async-thread / lockstep under SINGLE_THREADED_EXECUTOR.

Variants run interleaved round by round in one process (the order rotates), each
round's block after a barrier; at 2 ranks a sample is the slowest rank's. The ops
are compiled with TensorFlow's own flags into a temporary directory (or --lib):

    .venv/bin/python benchmarks/studies/tf_kernel_floor.py
    .venv/bin/python benchmarks/studies/tf_kernel_floor.py --inter-op 1 --extras
    mpirun -np 2 --bind-to core .venv/bin/python benchmarks/studies/tf_kernel_floor.py

with PYTHONPATH pointing at a built lockstep (python/) for the lockstep variant.
TensorFlow sizes its inter-op pool by the cores the process may use: one thread
per rank under `--bind-to core` (as `make bench` runs), two in a plain 1-rank run
on this 2-core machine; pass --inter-op 1 to compare 1 rank with 2 alike.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "tf_floor_ops.cc")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", help="the compiled ops: built there if missing (default: a temporary directory)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=200, help="timed calls per variant per round")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--inter-op", type=int, help="tf.config.threading.set_inter_op_parallelism_threads")
    parser.add_argument("--intra-op", type=int, help="tf.config.threading.set_intra_op_parallelism_threads")
    parser.add_argument("--extras", action="store_true", help="also the executor / jit / device variants")
    parser.add_argument(
        "--footprint",
        action="store_true",
        help="also inline kernels that spin for --spin-us or touch --touch-kb of memory before done",
    )
    parser.add_argument("--spin-us", type=float, default=2.7, help="lockstep's ComputeAsync time at 1 rank, say")
    parser.add_argument("--touch-kb", default="16,64", help="comma-separated sizes for --footprint")
    parser.add_argument("--no-lockstep", action="store_true", help="skip lockstep and MPI (variant 5)")
    return parser.parse_args()


class Job:
    """Rank, barrier and slowest-rank reduction: through mpi4py if used, else trivial."""

    def __init__(self, use_mpi):
        self.comm = None
        if use_mpi:
            from mpi4py import MPI  # before lockstep.init(), which then adopts MPI

            self.mpi = MPI
            self.comm = MPI.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank() if self.comm else 0
        self.size = self.comm.Get_size() if self.comm else 1

    def barrier(self):
        if self.comm:
            self.comm.Barrier()

    def slowest(self, seconds):
        local = np.ascontiguousarray(seconds, dtype=np.float64)
        if not self.comm:
            return local
        result = np.empty_like(local)
        self.comm.Allreduce(local, result, op=self.mpi.MAX)
        return result


def mpicxx():
    """The MPI compiler wrapper beside this Python (the venv's MPI, which mpi4py and
    lockstep load), else the one on PATH: a system MPI's would not link against it."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpicxx")
    return beside if os.path.exists(beside) else "mpicxx"


def build(job, lib):
    """Compiles tf_floor_ops.cc with TensorFlow's flags (rank 0; the others wait)."""
    import tensorflow as tf

    if lib is None:
        directory = tempfile.mkdtemp(prefix="tf_floor_") if job.rank == 0 else None
        directory = job.comm.bcast(directory) if job.comm else directory
        lib = os.path.join(directory, "tf_floor_ops_mpi.so" if job.comm else "tf_floor_ops.so")
    if job.rank == 0 and not os.path.exists(lib):
        command = [
            "g++",
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-O2",
            "-Wno-deprecated-declarations",
            "-Wno-interference-size",
            SOURCE,
            "-o",
            lib,
        ]
        command += tf.sysconfig.get_compile_flags() + tf.sysconfig.get_link_flags()
        if job.comm:
            for part in ("compile", "link"):
                command += subprocess.run(
                    [mpicxx(), f"--showme:{part}"], check=True, capture_output=True, text=True
                ).stdout.split()
            command.append("-DFLOOR_WITH_MPI")
        subprocess.run(command, check=True)
    job.barrier()
    return tf.load_op_library(lib)


def make_variants(args, job, ops, hvd):
    """{name: (call, setup, teardown)}; setup/teardown bracket each timed block."""
    import tensorflow as tf

    x = tf.constant([1.0])

    def fetch(function):
        return lambda: function(x).numpy()

    def noop(v):
        return tf.identity(v)

    variants = {
        "no-op tf.function (tf.identity)": (fetch(tf.function(noop)), None, None),
        "sync OpKernel (copy)": (fetch(tf.function(lambda v: ops.floor_sync(v))), None, None),
        "async, done inline": (fetch(tf.function(lambda v: ops.floor_async_inline(v))), None, None),
    }
    if args.footprint:
        spin_ns = int(args.spin_us * 1000)
        variants[f"async inline, {args.spin_us:g} us spin"] = (
            fetch(tf.function(lambda v: ops.floor_async_inline_work(v, spin_ns=spin_ns))),
            None,
            None,
        )

        def touching(kb):  # a closure: a default argument would become the function's input
            return tf.function(lambda v: ops.floor_async_inline_work(v, touch_kb=kb))

        for kb in (int(k) for k in args.touch_kb.split(",")):
            variants[f"async inline, touching {kb} KiB"] = (fetch(touching(kb)), None, None)
    thread_fn = tf.function(lambda v: ops.floor_async_thread(v))
    variants["async, done from condvar thread"] = (fetch(thread_fn), None, None)
    variants["async, done from spinning thread"] = (
        fetch(thread_fn),
        lambda: ops.floor_set_spin(True),
        lambda: ops.floor_set_spin(False),
    )
    allreduce_fn = None
    if hvd is not None:
        allreduce_fn = tf.function(lambda v: hvd.allreduce(v, name="bench.fn.scalar"))
        variants["lockstep allreduce"] = (fetch(allreduce_fn), None, None)
        host, received = np.ones(1, np.float32), np.empty(1, np.float32)
        raw = job.comm

        variants["MPI_Allreduce 4 B (mpi4py)"] = (lambda: raw.Allreduce(host, received, op=job.mpi.SUM), None, None)
        import lockstep.numpy as hvd_numpy

        variants["lockstep.numpy allreduce 4 B"] = (
            lambda: hvd_numpy.allreduce(host, name="floor.numpy", op=hvd_numpy.Sum),
            None,
            None,
        )
        variants["MPI_Allreduce in sync OpKernel"] = (fetch(tf.function(lambda v: ops.floor_mpi_sync(v))), None, None)
        variants["MPI_Allreduce in async kernel, done inline"] = (
            fetch(tf.function(lambda v: ops.floor_mpi_async_inline(v))),
            None,
            None,
        )
        variants["MPI_Allreduce in async worker thread"] = (
            fetch(tf.function(lambda v: ops.floor_mpi_thread(v))),
            None,
            None,
        )
    if args.extras:
        variants["no-op, jit_compile=False"] = (fetch(tf.function(noop, jit_compile=False)), None, None)
        variants["no-op, jit_compile=True"] = (fetch(tf.function(noop, jit_compile=True)), None, None)
        variants["no-op, concrete function"] = (fetch(tf.function(noop).get_concrete_function(x)), None, None)
        variants["async thread, concrete function"] = (
            fetch(tf.function(lambda v: ops.floor_async_thread(v)).get_concrete_function(x)),
            None,
            None,
        )

        def pinned(v):
            with tf.device("/device:CPU:0"):
                return ops.floor_async_thread(v)

        variants["async thread, op pinned to CPU:0"] = (fetch(tf.function(pinned)), None, None)
        single = [("no-op", tf.function(noop)), ("async thread", tf.function(lambda v: ops.floor_async_thread(v)))]
        if allreduce_fn is not None:
            single.append(("lockstep allreduce", tf.function(lambda v: hvd.allreduce(v, name="bench.fn.single"))))
        for label, function in single:
            manager = {}

            def enter(manager=manager):
                manager["cm"] = tf.experimental.function_executor_type("SINGLE_THREADED_EXECUTOR")
                manager["cm"].__enter__()

            def leave(manager=manager):
                manager.pop("cm").__exit__(None, None, None)

            variants[f"{label}, SINGLE_THREADED_EXECUTOR"] = (fetch(function), enter, leave)
    return variants


def run_interleaved(job, variants, rounds, reps, warmup):
    names = list(variants)
    for name in names:
        call, setup, teardown = variants[name]
        if setup:
            setup()
        for _ in range(warmup):
            call()
        if teardown:
            teardown()
    samples = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            call, setup, teardown = variants[name]
            if setup:
                setup()
            job.barrier()
            for _ in range(reps):
                start = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - start)
            if teardown:
                teardown()
    return {name: job.slowest(samples[name]) for name in names}


def main():
    args = parse_args()
    job = Job(use_mpi=not args.no_lockstep)
    import tensorflow as tf

    if args.inter_op is not None:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    if args.intra_op is not None:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)
    ops = build(job, args.lib)
    hvd = None
    if not args.no_lockstep:
        import lockstep.tensorflow as hvd

        hvd.init()
    variants = make_variants(args, job, ops, hvd)
    seconds = run_interleaved(job, variants, args.rounds, args.reps, args.warmup)
    if job.rank == 0:
        threads = f"inter-op {tf.config.threading.get_inter_op_parallelism_threads()}"
        threads += f", intra-op {tf.config.threading.get_intra_op_parallelism_threads()} (0 = TF's default)"
        print(f"TF {tf.__version__}, {job.size} rank(s), {threads}, {args.rounds} rounds x {args.reps} calls")
        base = float(np.median(seconds["no-op tf.function (tf.identity)"]))
        print(f"{'variant':44s} {'median':>9s} {'p90':>9s} {'median - no-op':>15s}")
        for name, values in seconds.items():
            median, p90 = np.median(values) * 1e6, np.percentile(values, 90) * 1e6
            print(f"{name:44s} {median:6.1f} us {p90:6.1f} us {median - base * 1e6:+12.1f} us")
        sys.stdout.flush()
    if hvd is not None:
        hvd.shutdown()


if __name__ == "__main__":
    main()
