"""Soak test: many mixed collectives with every result checked exactly, and resident
memory sampled along the way to show that it stays flat.

    mpirun --oversubscribe --bind-to none -np 3 .venv/bin/python benchmarks/soak.py --ops 100000

Every rank draws the same random sequence (one shared seed) of collectives: every
kind (allreduce with every reduce op, grouped allreduce, uneven allgather,
broadcast, alltoall with splits, reducescatter, barrier), random dtypes and sizes,
repeating names (response cache hits), fresh names and automatic names,
synchronous calls and batches of asynchronous ones. RSS (VmRSS) is sampled on
every rank; the growth from the end of warm-up (--warmup, a fraction of the run)
to the end, where both halves of that window grow, must stay under --max-growth-mib
on every rank. Rank 0 prints the
series and a summary; --json writes them. Exits non-zero on a wrong result or
memory growth beyond the limit.

The cache of freed result buffers (LOCKSTEP_HOST_BUFFER_CACHE_BYTES, 128 MiB by
default) keeps memory by design, up to its bound, and random sizes fill it slowly;
unless the variable is set, this script bounds it at 4 MiB, so that growth past the
limit is a leak and the cache's eviction is exercised on every run.
"""

import argparse
import gc
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from memory_probe import resident_bytes  # noqa: E402
from soak_ops import Op, draw_spec  # noqa: E402

import lockstep.numpy as hvd  # noqa: E402

MIB = 1 << 20


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=100_000, help="collectives to run")
    parser.add_argument("--seed", type=int, default=20261123, help="shared by every rank")
    parser.add_argument("--samples", type=int, default=20, help="RSS samples over the run")
    parser.add_argument("--warmup", type=float, default=0.2, help="fraction of the run before RSS must be flat")
    parser.add_argument("--max-growth-mib", type=float, default=8.0, help="allowed RSS growth after warm-up")
    parser.add_argument("--json", help="write the results here (rank 0)")
    return parser.parse_args()


class Soak:
    def __init__(self, args, rank, size):
        self.args, self.rank, self.size = args, rank, size
        self.rng = np.random.default_rng(args.seed)  # the same sequence on every rank
        self.done = 0
        self.counts = {}
        self.samples = []  # (ops done, seconds, RSS bytes)

    def run(self):
        started = time.monotonic()
        every = max(1, self.args.ops // self.args.samples)
        next_sample = every
        self.sample(started)
        while self.done < self.args.ops:
            self.step()
            if self.done >= next_sample:
                self.sample(started)
                next_sample += every
        hvd.barrier()
        if self.samples[-1][0] != self.done:
            self.sample(started)
        return time.monotonic() - started

    def step(self):
        """One synchronous op, or a batch of asynchronous ones checked in a
        rank-dependent order (completion order must not matter)."""
        if self.rng.random() < 0.5:
            op = self.next_op(set())
            if op is not None:
                op.check(op.submit(asynchronous=False))
            return
        names = set()
        batch = []
        for _ in range(int(self.rng.integers(2, 9))):
            op = self.next_op(names, asynchronous=True)
            if op is not None:
                batch.append((op, op.submit(asynchronous=True)))
        for index in np.random.default_rng(self.rank + self.done).permutation(len(batch)):
            op, handle = batch[index]
            op.check(hvd.synchronize(handle))

    def next_op(self, names_in_flight, asynchronous=False):
        if self.done >= self.args.ops:
            return None
        spec = draw_spec(self.rng, self.size, self.done)
        if asynchronous and spec["kind"] == "barrier":
            spec = {
                "kind": "allreduce",
                "name": None,
                "seed": spec["seed"],
                "op": "Sum",
                "members": [(np.dtype(np.int32), 3)],
            }
        if spec["name"] in names_in_flight:  # a name may be in flight only once
            spec["name"] = f"soak.fresh.{self.done}"
        if spec["name"] is not None:
            names_in_flight.add(spec["name"])
        self.done += 1
        self.counts[spec["kind"]] = self.counts.get(spec["kind"], 0) + 1
        return Op(spec, self.rank, self.size)

    def sample(self, started):
        gc.collect()
        rss = resident_bytes()["VmRSS"]
        self.samples.append((self.done, time.monotonic() - started, rss))
        if self.rank == 0:
            print(
                f"soak: {self.done:>7} ops  {self.samples[-1][1]:8.1f} s  rank 0 RSS {rss / MIB:8.1f} MiB", flush=True
            )

    def growth_after_warmup(self):
        """(RSS at the end minus RSS at the first sample after warm-up, the growth that
        counts), in bytes. Single samples move by a few MiB with the large tensors that
        happen to be live or cached by malloc, so ends are medians of 3 samples. And a
        leak grows in both halves of the window, while one rise of malloc's high-water
        mark (a large buffer freed into the heap, never given back) lands in one: the
        growth that counts is the lesser of the window's and twice its slower half's."""
        after = [rss for ops, _, rss in self.samples if ops >= self.args.warmup * self.args.ops]
        whole = np.median(after[-3:]) - np.median(after[:3])
        middle = len(after) // 2
        halves = (after[: middle + 1], after[middle:])
        slower = min(np.median(half[-2:]) - np.median(half[:2]) for half in halves)
        return after[-1] - after[0], int(min(whole, 2 * slower))


def main():
    args = parse_args()
    os.environ.setdefault("LOCKSTEP_HOST_BUFFER_CACHE_BYTES", str(4 << 20))
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    soak = Soak(args, rank, size)
    try:
        elapsed = soak.run()
    except AssertionError as error:
        print(f"rank {rank}: WRONG RESULT after {soak.done} ops: {error}", flush=True)
        os._exit(1)  # do not leave the other ranks waiting in a collective
    growths = hvd.allgather_object(soak.growth_after_warmup())
    series = hvd.allgather_object([rss for _, _, rss in soak.samples])
    failed = [r for r, (_, smoothed) in enumerate(growths) if smoothed > args.max_growth_mib * MIB]
    if rank == 0:
        report(args, soak, elapsed, size, growths, series, failed)
    hvd.shutdown()
    if failed:
        sys.exit(1)
    print(f"rank {rank}: ALL CHECKS PASSED", flush=True)


def report(args, soak, elapsed, size, growths, series, failed):
    ops = [ops for ops, _, _ in soak.samples]
    print(
        f"soak: {soak.done} ops on {size} ranks in {elapsed:.1f} s ({soak.done / elapsed:.0f} ops/s), "
        f"every result exact; mix {dict(sorted(soak.counts.items()))}"
    )
    print("soak: RSS in MiB at ops " + " ".join(str(o) for o in ops))
    for r, values in enumerate(series):
        print(f"soak:   rank {r}: " + " ".join(f"{v / MIB:.1f}" for v in values))
    print(
        f"soak: RSS growth from {args.warmup:.0%} to 100% of the run, per rank (MiB): "
        + ", ".join(f"{g / MIB:+.2f}" for g, _ in growths)
        + "; counted (see growth_after_warmup): "
        + ", ".join(f"{g / MIB:+.2f}" for _, g in growths)
        + f" (limit {args.max_growth_mib} MiB)"
    )
    if failed:
        print(f"soak: MEMORY GROWTH beyond the limit on rank(s) {failed}")
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(
                {
                    "ops": soak.done,
                    "ranks": size,
                    "seconds": elapsed,
                    "ops_per_second": soak.done / elapsed,
                    "mix": soak.counts,
                    "sample_ops": ops,
                    "rss_bytes": series,
                    "growth_bytes": growths,
                    "warmup_fraction": args.warmup,
                    "max_growth_mib": args.max_growth_mib,
                },
                stream,
                indent=1,
            )


if __name__ == "__main__":
    main()
