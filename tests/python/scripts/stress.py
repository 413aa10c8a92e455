"""1,000 async tensors of random sizes (0..100k elements), dtypes and collectives,
submitted in a different random order on every rank; every result exact.

The tensor set is drawn from a seed derived from the names, so every rank builds
the same set; only the submission order depends on the rank."""

import sys
import time
import zlib

import numpy as np
from rank_checks import (
    ALL_DTYPES,
    BOOL,
    assert_equal,
    average_values,
    expected_reduction,
    rank_values,
    run_main,
)

import lockstep.numpy as hvd

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
MAX_ELEMENTS = 100_000
OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max}


def draw_tensor_set(names):
    rng = np.random.default_rng(zlib.crc32("\n".join(names).encode()))
    specs = []
    for index, name in enumerate(names):
        dtype = ALL_DTYPES[rng.integers(len(ALL_DTYPES))]
        kind = rng.choice(["allreduce"] * 6 + ["allgather"] * 2 + ["broadcast"] * 2)
        op_names = ["Sum", "Min", "Max"] if dtype == BOOL else list(OPS)
        op_name = op_names[rng.integers(len(op_names))]
        elements = int(rng.integers(0, MAX_ELEMENTS + 1))
        root = int(rng.integers(1 << 30))
        specs.append(
            dict(name=name, index=index, dtype=dtype, kind=kind, op_name=op_name, elements=elements, root=root)
        )
    return specs


def input_for(spec, rank, size):
    if spec["kind"] == "allreduce" and spec["op_name"] == "Average":
        return average_values(spec["dtype"], (spec["elements"],), rank, size)
    elements = spec["elements"] if spec["kind"] != "allgather" else spec["elements"] // (rank + 1)
    return rank_values(spec["dtype"], (elements,), rank, offset=spec["index"] % 3)


def submit(spec, rank, size):
    data = input_for(spec, rank, size)
    if spec["kind"] == "allreduce":
        return hvd.allreduce_async(data, op=OPS[spec["op_name"]], name=spec["name"])
    if spec["kind"] == "allgather":
        return hvd.allgather_async(data, name=spec["name"])
    return hvd.broadcast_async(data, spec["root"] % size, name=spec["name"])


def expected_for(spec, size):
    inputs = [input_for(spec, r, size) for r in range(size)]
    if spec["kind"] == "allreduce":
        return expected_reduction(inputs, spec["dtype"], spec["op_name"], size)
    if spec["kind"] == "allgather":
        return np.concatenate(inputs)
    return inputs[spec["root"] % size]


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    specs = draw_tensor_set([f"stress.{i}" for i in range(COUNT)])
    order = np.random.default_rng(rank + 1).permutation(COUNT)
    started = time.monotonic()
    handles = {int(i): submit(specs[i], rank, size) for i in order}
    results = {i: hvd.synchronize(handles[i]) for i in sorted(handles)}
    elapsed = time.monotonic() - started
    for i, result in results.items():
        spec = specs[i]
        what = f"{spec['name']} ({spec['kind']} {spec['op_name']} {spec['dtype'].name} x{spec['elements']})"
        assert_equal(result, expected_for(spec, size), what)
    total_bytes = sum(r.nbytes for r in results.values())
    print(f"rank {rank}: {COUNT} tensors, {total_bytes / 1e6:.0f} MB of results in {elapsed:.1f} s", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
