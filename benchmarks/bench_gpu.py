"""The GPU benchmark (make gpu-bench): lockstep against torch.distributed's NCCL backend
and torch DDP on one GPU machine, one run, side by side; writes benchmarks/RESULTS-gpu.md.

    python3 benchmarks/bench_gpu.py [--quick] [--np 1 2] [--setting LOCKSTEP_X=V] [--results PATH] [--json PATH]

Each rank count is one mpirun job of gpu_bench_worker.py. At 2 ranks both ranks share
the machine's GPU: each gets its own NCCL_HOSTID (so NCCL accepts two ranks on one
GPU) and NCCL runs over loopback sockets, for lockstep and torch.distributed alike.
Those numbers compare the two on the same slow transport; they say nothing about
NVLink. The issue's targets are printed as PASS/MISS rows.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
PER_RANK_ENV = 'export NCCL_HOSTID="pretend-host-$OMPI_COMM_WORLD_RANK"; exec "$@"'

# Issue 10's targets.
BUSBW_RATIO = 0.97  # lockstep busbw >= 0.97x torch.distributed from 64 MiB up
LATENCY_RATIO = 1.5  # small-op latency <= 1.5x torch.distributed
OVERHEAD = 0.03  # DistributedOptimizer step <= plain step + 3% at 1 rank


def run_worker(ranks, out_path, quick, timeout_s, settings=()):
    env = {name: value for name, value in os.environ.items() if not name.startswith(("LOCKSTEP_", "HOROVOD_"))}
    env.update(settings)  # only the settings asked for on the command line (--setting)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.join(REPO_ROOT, "python"), BENCH_DIR, env.get("PYTHONPATH")) if p
    )
    env.update(
        NCCL_SOCKET_IFNAME="lo",
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        TORCH_CPP_LOG_LEVEL="ERROR",
    )
    command = [
        "mpirun",
        "-np",
        str(ranks),
        "--oversubscribe",
        "--bind-to",
        "none",
        "bash",
        "-c",
        PER_RANK_ENV,
        "rank",
        sys.executable,
        os.path.join(BENCH_DIR, "gpu_bench_worker.py"),
        "--out",
        out_path,
    ]
    if quick:
        command.append("--quick")
    print(f"== {ranks} rank(s): {' '.join(command)}", flush=True)
    started = time.monotonic()
    result = subprocess.run(command, env=env, cwd=REPO_ROOT, timeout=timeout_s)
    if result.returncode != 0 or not os.path.isfile(out_path):
        raise RuntimeError(f"the {ranks}-rank job failed (exit status {result.returncode})")
    with open(out_path) as stream:
        payload = json.load(stream)
    payload["wall_s"] = time.monotonic() - started
    return payload


def busbw(nbytes, seconds, ranks):
    """nccl-tests' bus bandwidth of an allreduce (GB/s); algorithm bandwidth at 1 rank."""
    factor = 2 * (ranks - 1) / ranks if ranks > 1 else 1.0
    return nbytes / seconds * factor / 1e9


def size_label(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def nccl_version(code):
    """NCCL_VERSION_CODE (e.g. 22809) as 2.28.9."""
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}" if code else "none"


def verdict(ok):
    return "PASS" if ok else "MISS"


def allreduce_section(result):
    ranks = result["ranks"]
    bw = "busbw" if ranks > 1 else "algbw"
    lines = [
        f"### Allreduce, {ranks} rank{'s' if ranks > 1 else ''} (float32 Sum, in place)",
        "",
        f"| size | lockstep | torch.distributed | ratio | lockstep {bw} | torch {bw} |",
        "|---|---|---|---|---|---|",
    ]
    targets = []
    for row in result["allreduce"]:
        ours, theirs = row["lockstep"], row["torch.distributed"]
        lines.append(
            f"| {size_label(row['bytes'])} | {ours * 1e6:.1f} us | {theirs * 1e6:.1f} us | "
            f"{ours / theirs:.2f}x | {busbw(row['bytes'], ours, ranks):.2f} GB/s | "
            f"{busbw(row['bytes'], theirs, ranks):.2f} GB/s |"
        )
    small = [row for row in result["allreduce"] if row["bytes"] <= 1024]
    if small:
        worst = max(row["lockstep"] / row["torch.distributed"] for row in small)
        targets.append(
            (
                f"small-op latency (<= 1 KiB) at {ranks} rank(s) <= {LATENCY_RATIO}x torch.distributed",
                f"worst {worst:.2f}x",
                worst <= LATENCY_RATIO,
            )
        )
    large = [row for row in result["allreduce"] if row["bytes"] >= 64 << 20]
    if large:
        worst = min(row["torch.distributed"] / row["lockstep"] for row in large)
        targets.append(
            (
                f"{bw} from 64 MiB up at {ranks} rank(s) >= {BUSBW_RATIO}x torch.distributed",
                f"worst {worst:.3f}x",
                worst >= BUSBW_RATIO,
            )
        )
    return lines, targets


def gradients_section(result):
    row = result["gradients"]
    hooks, theirs = row["lockstep (hooks)"], row["torch DDP"]
    bucketed = row.get("lockstep DistributedOptimizer")  # absent from results before it existed
    lines = [
        f"### ResNet-50 gradient set, {result['ranks']} rank(s): {row['tensors']} tensors, "
        f"{row['bytes'] / 2**20:.1f} MiB",
        "",
        "| variant | step (backward + reduction) |",
        "|---|---|",
    ]
    # At 1 rank DistributedOptimizer reduces nothing (as Horovod's): the hooks are judged there.
    judged = bucketed is not None and result["ranks"] > 1
    if bucketed is not None:
        how = "gradient buckets, then synchronize()" if judged else "at 1 rank it reduces nothing, as Horovod's"
        lines.append(f"| lockstep, DistributedOptimizer ({how}) | {bucketed * 1e3:.2f} ms |")
    lines += [
        f"| lockstep, allreduce_async_ from each gradient's hook | {hooks * 1e3:.2f} ms |",
        f"| torch DDP (its default 25 MiB buckets) | {theirs * 1e3:.2f} ms |",
    ]
    who, ours = ("DistributedOptimizer's", bucketed) if judged else ("hooks'", hooks)
    target = (
        f"{who} gradient step at {result['ranks']} rank(s) no slower than DDP",
        f"{ours / theirs:.2f}x DDP",
        ours <= theirs,
    )
    return lines, [target]


def training_section(result):
    row = result["training"]
    plain = row["plain"]
    lines = [
        f"### ResNet-50 training step, {result['ranks']} rank(s), batch {row['batch']} per rank",
        "",
        "| variant | step | vs plain |",
        "|---|---|---|",
    ]
    for variant in ("plain", "DistributedOptimizer", "allreduce hooks", "torch DDP"):
        lines.append(f"| {variant} | {row[variant] * 1e3:.2f} ms | {row[variant] / plain - 1:+.1%} |")
    targets = []
    if result["ranks"] == 1:
        overhead = row["DistributedOptimizer"] / plain - 1
        targets.append(
            (
                f"DistributedOptimizer overhead at 1 rank <= {OVERHEAD:.0%} of the step",
                f"{overhead:+.1%}",
                overhead <= OVERHEAD,
            )
        )
    return lines, targets


def overlap_section(result):
    row = result["overlap"]
    hooked, late = row["hooks (overlap)"], row["after backward"]
    first, backward = row["first_reduction_done_ms"], row["backward_ms"]
    lines = [
        f"### Backward overlapping the reduction, ResNet-50, {result['ranks']} rank(s), batch {row['batch']}",
        "",
        "| variant | step |",
        "|---|---|",
        f"| allreduce_async_ from each gradient's hook | {hooked * 1e3:.2f} ms |",
        f"| the same allreduces started after backward | {late * 1e3:.2f} ms |",
        "",
        f"On the GPU, backward took {backward:.1f} ms; the first gradient's reduction had finished "
        f"by {first:.1f} ms after backward's start (an upper bound).",
    ]
    targets = []
    if result["ranks"] > 1:
        targets.append(
            (
                f"first reduction done before backward ends at {result['ranks']} ranks",
                f"{first:.1f} ms of {backward:.1f} ms",
                first < backward,
            )
        )
    return lines, targets


def report(results, quick, settings=()):
    machine = results[0]["machine"]
    lines = [
        "# lockstep GPU benchmarks",
        "",
        f"Written by `make gpu-bench` (benchmarks/bench_gpu.py{' --quick' if quick else ''}) on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"- GPU: {machine['gpu']} ({machine['gpu_memory_gib']} GiB), {machine['gpus']} on the machine, "
        f"{machine['cpus']} CPUs",
        f"- torch {machine['torch']} (CUDA {machine['torch_cuda']}), its NCCL {machine['torch_nccl']}",
        f"- lockstep built against NCCL {nccl_version(machine['lockstep_nccl_built'])}, running "
        f"{nccl_version(machine['lockstep_nccl_runtime'])} from {machine['lockstep_nccl_library']} "
        f"({machine['lockstep_nccl_source']})",
        "- Multi-rank jobs share the one GPU: each rank has its own NCCL_HOSTID and NCCL runs over "
        "loopback sockets (NCCL_SOCKET_IFNAME=lo) for both libraries, so those rows compare them on "
        "the same slow transport, not at NVLink speeds.",
        "- Times are per operation over blocks of operations run until the GPU finished them, the "
        "slowest rank's, median over rounds in which the variants alternate.",
        "- lockstep settings: "
        + (", ".join(f"`{name}={value}`" for name, value in settings) if settings else "the defaults"),
        "",
    ]
    targets = []
    for result in results:
        for section in (allreduce_section, gradients_section, training_section, overlap_section):
            key = {
                allreduce_section: "allreduce",
                gradients_section: "gradients",
                training_section: "training",
                overlap_section: "overlap",
            }[section]
            if key in result:
                section_lines, section_targets = section(result)
                lines += section_lines + [""]
                targets += section_targets
    lines += ["## Targets (issue 10)", "", "| target | measured | |", "|---|---|---|"]
    lines += [f"| {name} | {measured} | {verdict(ok)} |" for name, measured, ok in targets]
    return "\n".join(lines) + "\n", targets


def unavailable_reason():
    """Why the benchmark cannot run here, or None."""
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.is_available() is False"
    sys.path.insert(0, os.path.join(REPO_ROOT, "python"))
    from lockstep import _core

    if not _core.nccl_built() or _core.nccl_info()["problem"]:
        return f"lockstep's GPU path cannot run here: {_core.nccl_info()['problem'] or 'nccl_built() is 0'}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--results", default=os.path.join(BENCH_DIR, "RESULTS-gpu.md"))
    parser.add_argument("--json", default=None, help="also write every job's raw results here")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per mpirun job")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a LOCKSTEP_* setting for the jobs (others in the environment are dropped); repeatable",
    )
    args = parser.parse_args()
    settings = [tuple(item.split("=", 1)) for item in args.setting]
    if any(len(pair) != 2 or not pair[0].startswith("LOCKSTEP_") for pair in settings):
        parser.error("--setting takes LOCKSTEP_NAME=VALUE")
    reason = unavailable_reason()
    if reason:
        sys.exit(f"make gpu-bench needs a GPU and lockstep's GPU path: {reason}")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for ranks in args.np:
            path = os.path.join(scratch, f"np{ranks}.json")
            results.append(run_worker(ranks, path, args.quick, args.timeout, settings))
    text, targets = report(results, args.quick, settings)
    with open(args.results, "w") as stream:
        stream.write(text)
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(results, stream, indent=1)
    print(text)
    for name, measured, ok in targets:
        print(f"{verdict(ok)}  {name}: {measured}")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
