"""Multi-host allreduce on a pretend cluster: lockstep flat vs hierarchical vs raw MPI.

    sudo .venv/bin/python benchmarks/studies/bench_multihost.py [--rounds 5] [--out FILE.md]

Starts 5 ranks on 3 pretend hosts (network namespaces joined by veth pairs, 2+2+1
ranks; tests/python/pretend_cluster.py) and, in the same job, alternates round by
round: raw MPI_Allreduce through mpi4py, lockstep with the flat path, and lockstep
with LOCKSTEP_HIERARCHICAL_ALLREDUCE=1 (init() after shutdown()). Float32 Sum,
in place. Each figure is the median over rounds of the slowest rank's mean time per
call. The network is veth on one 2-core machine: the figures say how the paths
compare on this transport only, not what a real network would give.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIZES = [4, 64 << 10, 1 << 20, 16 << 20]  # bytes
VARIANTS = ["MPI_Allreduce (mpi4py)", "lockstep flat", "lockstep hierarchical"]


def calls_for(size):
    return max(3, min(300, (32 << 20) // max(size, 1) // 4))


def measure_rank(rounds):
    import numpy as np
    from mpi4py import MPI

    import lockstep
    import lockstep.numpy as hvd

    comm = MPI.COMM_WORLD
    arrays = {size: np.ones(max(size // 4, 1), np.float32) for size in SIZES}
    results = {(variant, size): [] for variant in VARIANTS for size in SIZES}

    def timed(run, size):
        comm.Barrier()
        started = time.perf_counter()
        for _ in range(calls_for(size)):
            run()
        mine = (time.perf_counter() - started) / calls_for(size)
        return comm.allreduce(mine, op=MPI.MAX)

    for round_index in range(rounds):
        order = VARIANTS if round_index % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            if variant.startswith("MPI"):
                for size, array in arrays.items():
                    out = np.empty_like(array)
                    comm.Allreduce(array, out)  # warm-up
                    results[(variant, size)].append(timed(lambda: comm.Allreduce(array, out), size))
                continue
            os.environ["LOCKSTEP_HIERARCHICAL_ALLREDUCE"] = "1" if "hierarchical" in variant else "0"
            lockstep.init()
            for size, array in arrays.items():
                name = f"bench.{size}"
                hvd.allreduce_(array, name=name, op=hvd.Sum)  # negotiates the name once
                results[(variant, size)].append(timed(lambda: hvd.allreduce_(array, name=name, op=hvd.Sum), size))
            lockstep.shutdown()
    if comm.rank == 0:
        medians = {f"{variant}|{size}": float(np.median(values)) for (variant, size), values in results.items()}
        print("RESULTS " + json.dumps(medians), flush=True)


def human(size):
    return f"{size} B" if size < 1024 else f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"


def report(medians, rounds, seconds):
    load = os.getloadavg()[0]
    lines = [
        "# Multi-host allreduce on the pretend cluster",
        "",
        f"`benchmarks/studies/bench_multihost.py --rounds {rounds}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}:",
        "5 ranks on 3 pretend hosts (2+2+1 ranks; network namespaces joined by veth pairs on",
        "one bridge) on this 2-core VM, float32 Sum in place, variants alternating round by",
        "round in one job; median over rounds of the slowest rank's mean time per call.",
        f"Load average at the end: {load:.1f} (other jobs share the machine); the run took {seconds:.0f} s.",
        "",
        '**These figures are for the veth transport on one machine only**: every "host"',
        "shares the same 2 cores and memory, so crossing a host costs a trip through the",
        "kernel's network stack rather than a real network, and the hosts compete for CPU.",
        "",
        "| size | " + " | ".join(VARIANTS) + " | hierarchical / flat |",
        "|---|" + "---|" * (len(VARIANTS) + 1),
    ]
    for size in SIZES:
        cells = [medians[f"{variant}|{size}"] for variant in VARIANTS]
        ratio = cells[2] / cells[1]
        lines.append(f"| {human(size)} | " + " | ".join(f"{c * 1e6:,.0f} us" for c in cells) + f" | {ratio:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "studies" / "RESULTS-multihost.md"))
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        measure_rank(args.rounds)
        return 0
    sys.path.insert(0, str(REPO / "tests" / "python"))
    import pretend_cluster

    reason = pretend_cluster.unavailable_reason()
    if reason:
        sys.exit(f"bench_multihost: {reason}")
    started = time.monotonic()
    with pretend_cluster.PretendCluster([2, 2, 1]) as cluster:
        run = cluster.mpirun([sys.executable, __file__, "--rank", "--rounds", str(args.rounds)], timeout=1200)
    found = [line for line in run.stdout.splitlines() if line.startswith("RESULTS ")]
    if run.returncode != 0 or not found:
        sys.exit(f"bench_multihost: the job failed\n{run.describe()}")
    text = report(json.loads(found[0][len("RESULTS ") :]), args.rounds, time.monotonic() - started)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
