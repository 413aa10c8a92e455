"""`make bench`: run the ten benchmarks side by side with their comparators.

Each benchmark is its own mpirun job (2 ranks; training also 1 rank; bandwidth and
shm also 3, and a short idle-only latency job at 3 for the background thread's idle
target, 3 ranks oversubscribing a 2-core machine; negotiation 2 to 64). The JSON of
every job, a Markdown report and PNG plots go to results/<date-time>/ (and
results/latest points there); the report is printed at the end. A full run also
refreshes the committed copy of the report, benchmarks/RESULTS.md (without the
plots, which stay build output), that docs/PERFORMANCE.md quotes.

    .venv/bin/python benchmarks/run_all.py                  # everything, several minutes
    .venv/bin/python benchmarks/run_all.py --quick          # smoke test, ~4 minutes
    .venv/bin/python benchmarks/run_all.py --only latency bandwidth
    .venv/bin/python benchmarks/run_all.py --np 2 4 8      # also latency, bandwidth and
                                                           # gradient step at 4 and 8 ranks
"""

import argparse
import csv
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time

import launcher
import plots
import report
from launcher import BENCH_DIR, REPO_ROOT, LaunchFailed

MIB = 1 << 20
BENCHMARKS = (
    "latency",
    "bandwidth",
    "gradient_step",
    "training",
    "memory",
    "shm",
    "jax",
    "autotune",
    "negotiation",
    "tensorflow",
)
# Default and autotuned launches alternate, spreading the machine's drift over both.
AUTOTUNE_LAUNCHES = ("default", "autotune") * 3
# Run at every rank count of --np (make bench NP="2 4 8"); the rest at their own counts.
PER_RANK_COUNT = ("latency", "bandwidth", "gradient_step")
# Counts run on top of --np: the targets want busbw and the idle background thread
# at 3 ranks as well (latency's extra counts run only its idle measurement).
EXTRA_RANKS = {"latency": (3,), "bandwidth": (3,)}
# Alternating 1- and 2-rank launches spreads the machine's drift over both.
TRAINING_RANKS = (1, 2, 1, 2, 1, 2)
MEMORY_THRESHOLDS_MIB = (0, 1, 4, 16, 64, 128)
SHM_RANKS = (2, 3)
# Negotiation's cycle by rank count; above the core count the job is oversubscribed.
NEGOTIATION_RANKS = (2, 4, 8, 16, 32, 64)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few repetitions; does not touch the committed copies")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run only these benchmarks")
    parser.add_argument("--results-dir", help="where to write (default: results/<date-time>)")
    parser.add_argument("--real-data", action="store_true", help="train on Fashion-MNIST instead of synthetic data")
    parser.add_argument(
        "--np",
        nargs="+",
        type=int,
        default=[2],
        metavar="N",
        help="rank counts for latency, bandwidth and the gradient step (default 2); "
        "counts above the core count oversubscribe",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="record a lockstep timeline of the gradient step (slows it down a little)",
    )
    return parser.parse_args()


class Runner:
    """Runs the launches of one `make bench` and remembers what failed."""

    def __init__(self, results_dir, args):
        self.results_dir = results_dir
        self.quick = args.quick
        self.real_data = args.real_data
        self.timeline = args.timeline
        self.failures = []
        self.rank_counts = args.np
        self.ranks = 2  # the rank count of latency, bandwidth and gradient_step

    def launch(self, label, script, ranks, out_name, args=(), settings=None):
        print(f"--> {label}", flush=True)
        extra = ["--quick"] if self.quick else []
        out_path = os.path.join(self.results_dir, "json", out_name)
        try:
            result = launcher.run_benchmark(script, ranks, out_path, [*args, *extra], settings)
        except LaunchFailed as failure:
            print(f"FAILED: {failure}", file=sys.stderr, flush=True)
            self.failures.append(str(failure).splitlines()[0])
            return None
        print(f"    ({result['wall_s']:.0f} s)", flush=True)
        return result

    def latency(self):
        if self.ranks not in self.rank_counts:  # an extra count: the idle measurement only
            label, args = f"1/10 background thread while idle, {self.ranks} ranks", ["--idle-only"]
        else:
            label, args = f"1/10 latency, then the background thread while idle, {self.ranks} ranks", []
        return self.launch(label, "bench_latency.py", self.ranks, self._json("latency"), args)

    def bandwidth(self):
        return self.launch(
            f"2/10 bandwidth, {self.ranks} ranks", "bench_bandwidth.py", self.ranks, self._json("bandwidth")
        )

    def _json(self, key):
        return f"{key}.json" if self.ranks == 2 else f"{key}_{self.ranks}ranks.json"

    def gradient_step(self):
        settings = {}
        if self.timeline:
            path = os.path.join(self.results_dir, "timeline_gradient_step.json")
            settings = {"LOCKSTEP_TIMELINE": path, "LOCKSTEP_TIMELINE_MARK_CYCLES": "1"}
        return self.launch(
            f"3/10 ResNet-50 gradient step, {self.ranks} ranks",
            "bench_gradient_step.py",
            self.ranks,
            self._json("gradient_step"),
            settings=settings,
        )

    def training(self):
        data = ["--data", "real" if self.real_data else "synthetic"]
        ranks_list = TRAINING_RANKS[:2] if self.quick else TRAINING_RANKS
        launches = []
        for index, ranks in enumerate(ranks_list):
            label = f"4/10 training throughput, {ranks} rank(s), launch {index + 1} of {len(ranks_list)}"
            result = self.launch(label, "bench_training.py", ranks, f"training_{index}_{ranks}ranks.json", data)
            if result is not None:
                launches.append(result)
        return {"launches": launches} if {1, 2} <= {launch["ranks"] for launch in launches} else None

    def memory(self):
        rows = []
        for settings in memory_settings(self.quick):
            described = ", ".join(f"{name}={value}" for name, value in settings.items())
            name = "memory_" + "_".join(f"{key.split('_')[-1].lower()}{value}" for key, value in settings.items())
            result = self.launch(f"5/10 memory, {described}", "bench_memory.py", 2, f"{name}.json", settings=settings)
            if result is not None:
                rows += result["rows"]
        return {"rows": rows} if rows else None

    def shm(self):
        rows = []
        for ranks in SHM_RANKS:
            result = self.launch(
                f"6/10 shared-memory allreduce vs MPI path, {ranks} ranks",
                "bench_shm.py",
                ranks,
                f"shm_{ranks}ranks.json",
            )
            if result is not None:
                rows += [dict(row, ranks=ranks) for row in result["rows"]]
        return {"rows": rows} if rows else None

    def jax(self):
        # Skipped (not failed) where JAX is not installed: it is an optional frontend.
        if importlib.util.find_spec("jax") is None:
            print("7/10 JAX inside jit: skipped, jax is not installed", flush=True)
            return None
        return self.launch(
            "7/10 JAX collectives and training step inside jit vs mpi4jax, 2 ranks", "bench_jax.py", 2, "jax.json"
        )

    def autotune(self):
        launches = []
        modes = AUTOTUNE_LAUNCHES[:2] if self.quick else AUTOTUNE_LAUNCHES
        for index, mode in enumerate(modes):
            settings, log = {}, None
            if mode == "autotune":
                log = os.path.join(self.results_dir, f"autotune_{index}.csv")
                settings = {"LOCKSTEP_AUTOTUNE": "1", "LOCKSTEP_AUTOTUNE_LOG": log}
            result = self.launch(
                f"8/10 gradient step, {mode} settings, launch {index + 1} of {len(modes)}",
                "bench_autotune.py",
                2,
                f"autotune_{index}_{mode}.json",
                settings=settings,
            )
            if result is not None:
                launches.append(dict(result, mode=mode, log=read_autotune_log(log)))
        return {"launches": launches} if launches else None

    def negotiation(self):
        rows = []
        for ranks in NEGOTIATION_RANKS[:3] if self.quick else NEGOTIATION_RANKS:
            result = self.launch(
                f"9/10 negotiation cycle, {ranks} ranks",
                "bench_negotiation.py",
                ranks,
                f"negotiation_{ranks}ranks.json",
            )
            if result is not None:
                rows += [dict(row, ranks=ranks, oversubscribed=result["oversubscribed"]) for row in result["rows"]]
        return {"rows": rows} if rows else None

    def tensorflow(self):
        # Skipped (not failed) where TensorFlow is not installed: it is an optional frontend.
        if importlib.util.find_spec("tensorflow") is None:
            print("10/10 TensorFlow: skipped, tensorflow is not installed", flush=True)
            return None
        return self.launch(
            "10/10 TensorFlow eager and inside tf.function vs a no-op tf.function and raw MPI, 2 ranks",
            "bench_tensorflow.py",
            2,
            "tensorflow.json",
        )


def read_autotune_log(path):
    """The tuner's windows and its final choice, or None."""
    if path is None or not os.path.exists(path):
        return None
    with open(path) as stream:
        rows = list(csv.DictReader(stream))
    return {
        "windows": len([row for row in rows if row["phase"] != "final"]),
        "final": next((row for row in rows if row["phase"] == "final"), None),
    }


def memory_settings(quick):
    thresholds = (0, 128) if quick else MEMORY_THRESHOLDS_MIB
    settings = [{"LOCKSTEP_FUSION_THRESHOLD": str(mib * MIB)} for mib in thresholds]
    # Horovod's layout: no chunking, so everything up to the threshold is fused.
    settings.append({"LOCKSTEP_CHUNK_BYTES": "0"})
    return settings


def mpi_version():
    try:
        mpirun, _ = launcher.built_mpi()
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown MPI"
    return out.strip().splitlines()[0] if out.strip() else "unknown MPI"


def machine_description():
    return (
        f"{platform.node()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"{mpi_version()}, Python {platform.python_version()}"
    )


def run_benchmarks(runner, keys, rank_counts):
    """{benchmark: result} for the 2-rank runs (or the first count where 2 is not
    asked for), plus "by_ranks": {count: {benchmark: result}} for every count of the
    benchmarks that ran at more than one."""
    results, by_ranks = {}, {}
    main_count = 2 if 2 in rank_counts else rank_counts[0]
    for key in keys:
        for count in _counts(key, rank_counts):
            runner.ranks = count or 2
            result = getattr(runner, key)()
            if result is None:
                continue
            if count is None or count == main_count:
                results[key] = result
            if count is not None:
                by_ranks.setdefault(count, {})[key] = result
    if set(by_ranks) - {2}:
        results["by_ranks"] = by_ranks
    return results


def _counts(key, rank_counts):
    """The rank counts `key` runs at; [None] for a benchmark with its own counts."""
    if key not in PER_RANK_COUNT:
        return [None]
    return [*rank_counts, *(count for count in EXTRA_RANKS.get(key, ()) if count not in rank_counts)]


def load_average():
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def write_outputs(results, results_dir, publish):
    """JSON, Markdown and plots into results_dir; with `publish` also the committed report."""
    with open(os.path.join(results_dir, "results.json"), "w") as stream:
        json.dump(results, stream, indent=1)
    links = {
        key: f"plots/{name}" for key, name in plots.write_plots(results, os.path.join(results_dir, "plots")).items()
    }
    markdown = report.render(results, links)
    with open(os.path.join(results_dir, "results.md"), "w") as stream:
        stream.write(markdown)
    _point_latest_at(results_dir)
    if publish:  # the plots stay build output: committing them on every run only grew the history
        with open(os.path.join(BENCH_DIR, "RESULTS.md"), "w") as stream:
            stream.write(report.render(results))
    return markdown


def _point_latest_at(results_dir):
    results_root = os.path.join(REPO_ROOT, "results")
    if os.path.dirname(results_dir) != results_root:
        return  # a run written elsewhere (--results-dir) is not "the latest" of results/
    latest = os.path.join(results_root, "latest")
    if os.path.islink(latest):
        os.remove(latest)
    if not os.path.exists(latest):
        os.symlink(os.path.relpath(results_dir, os.path.dirname(latest)), latest)


def main():
    args = parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results_dir = os.path.abspath(args.results_dir or os.path.join(REPO_ROOT, "results", stamp))
    os.makedirs(os.path.join(results_dir, "json"), exist_ok=True)
    runner = Runner(results_dir, args)
    started, load_before = time.monotonic(), load_average()
    results = run_benchmarks(runner, args.only or BENCHMARKS, args.np)
    results["meta"] = {
        "command": "make bench"
        if not (args.quick or args.only)
        else " ".join(["benchmarks/run_all.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine_description(),
        "total_s": time.monotonic() - started,
        "load_before": load_before,
        "load_after": load_average(),
        "quick": args.quick,
        "cores": os.cpu_count(),
        "mpi": mpi_version(),
        "rank_counts": args.np,
    }
    # Only a complete, undisturbed run replaces the committed copies.
    publish = not (args.quick or args.only or args.timeline or runner.failures or args.np != [2])
    print("\n" + write_outputs(results, results_dir, publish))
    print(f"Results in {results_dir}" + (" (also benchmarks/RESULTS.md)" if publish else ""))
    if runner.failures:
        print("Failed launches:\n  " + "\n  ".join(runner.failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
