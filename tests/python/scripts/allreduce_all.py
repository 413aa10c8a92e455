"""Allreduce and grouped_allreduce: every dtype x every reduce op x scaling, sync
and async, on shapes from 0-d to empty to multi-dimensional; exact results."""

import os
import time
import warnings

import numpy as np
from checks import check
from rank_checks import (
    ALL_DTYPES,
    BOOL,
    FLOAT_DTYPES,
    INTEGER_DTYPES,
    NUMERIC_DTYPES,
    assert_equal,
    average_values,
    expect_error,
    expected_reduction,
    product_values,
    rank_values,
    run_main,
)

import lockstep.numpy as hvd

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}
SHAPES = [(17,), (3, 4), (), (0,), (2, 0, 3)]


def inputs_for(dtype, shape, op_name, size):
    if op_name == "Product":
        return [product_values(dtype, shape, r) for r in range(size)]
    if op_name == "Average":
        return [average_values(dtype, shape, r, size) for r in range(size)]
    return [rank_values(dtype, shape, r) for r in range(size)]


class PendingChecks:
    """Async submissions with their expected results, checked after all are in flight."""

    def __init__(self):
        self.items = []

    def add(self, handle, expected, sent, what):
        self.items.append((handle, expected, sent, sent.copy(), what))

    def check_all(self):
        for handle, expected, sent, original, what in self.items:
            result = hvd.synchronize(handle)
            assert_equal(result, expected, what)
            assert result is not sent, f"{what}: the result must be a new array"
            assert_equal(sent, original, f"{what}: input must be untouched")
        self.items.clear()


def check_every_dtype_and_op(rank, size):
    pending = PendingChecks()
    for dtype in ALL_DTYPES:
        ops = ["Sum", "Min", "Max", "Product"] if dtype == BOOL else list(OPS)
        for op_name in ops:
            for shape in SHAPES:
                inputs = inputs_for(dtype, shape, op_name, size)
                what = f"allreduce {dtype.name} {op_name} shape {shape}"
                handle = hvd.allreduce_async(inputs[rank], op=OPS[op_name], name=what)
                pending.add(handle, expected_reduction(inputs, dtype, op_name, size), inputs[rank], what)
    pending.check_all()


def check_scaling(rank, size):
    pending = PendingChecks()
    float_factors = [(0.5, 4.0), (2.0, 0.25), (1.0, 3.0)]
    int_factors = [(2.0, 3.0), (0.5, 1.0), (1.0, 2.0)]  # 0.5 truncates each input toward zero
    for dtype in NUMERIC_DTYPES:
        factors = float_factors if dtype in FLOAT_DTYPES else int_factors
        for op_name in ("Sum", "Average", "Max"):
            for prescale, postscale in factors:
                inputs = inputs_for(dtype, (3, 5), op_name, size)
                what = f"allreduce {dtype.name} {op_name} prescale {prescale} postscale {postscale}"
                handle = hvd.allreduce_async(
                    inputs[rank], op=OPS[op_name], name=what, prescale_factor=prescale, postscale_factor=postscale
                )
                expected = expected_reduction(inputs, dtype, op_name, size, prescale, postscale)
                pending.add(handle, expected, inputs[rank], what)
    pending.check_all()


def check_defaults_and_deprecated_average(rank, size):
    inputs = [average_values(np.dtype(np.float32), (6,), r, size) for r in range(size)]
    assert_equal(
        hvd.allreduce(inputs[rank]),
        expected_reduction(inputs, np.dtype(np.float32), "Average", size),
        "allreduce default op is Average",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summed = hvd.allreduce(inputs[rank], average=False, name="deprecated.average.false")
        averaged = hvd.allreduce(inputs[rank], average=True, name="deprecated.average.true")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught), "average= must warn"
    assert_equal(summed, expected_reduction(inputs, np.dtype(np.float32), "Sum", size), "average=False sums")
    assert_equal(averaged, expected_reduction(inputs, np.dtype(np.float32), "Average", size), "average=True")
    expect_error(ValueError, ["average"], hvd.allreduce, inputs[rank], average=True, op=hvd.Sum)
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)


def check_numpy_scalars(rank, size):
    result = hvd.allreduce(np.float32(rank + 1), op=hvd.Sum, name="numpy.scalar")
    assert_equal(result, np.array(size * (size + 1) / 2, dtype=np.float32), "numpy scalar input")
    result = hvd.allreduce(np.int64(rank), op=hvd.Max)
    assert_equal(result, np.array(size - 1, dtype=np.int64), "unnamed numpy int64 scalar")


def check_unnamed_ops_interleaved(rank, size):
    """Automatic names must line up across ranks for sync and async calls alike."""
    handles = [hvd.allreduce_async(np.full(4, rank + i, np.int32), op=hvd.Sum) for i in range(5)]
    blocking = hvd.allreduce(np.full(2, rank, np.int16), op=hvd.Sum)
    for i, handle in enumerate(handles):
        expected = np.full(4, sum(r + i for r in range(size)), np.int32)
        assert_equal(hvd.synchronize(handle), expected, f"unnamed async allreduce {i}")
    assert_equal(blocking, np.full(2, sum(range(size)), np.int16), "unnamed blocking allreduce")


def check_in_place(rank, size):
    """allreduce_ and allreduce_async_ write into the array itself and return it."""
    array = np.arange(6, dtype=np.float32).reshape(2, 3) + rank
    expected = np.arange(6, dtype=np.float32).reshape(2, 3) * size + sum(range(size))
    returned = hvd.allreduce_(array, op=hvd.Sum, name="in.place.sync")
    assert returned is array, "allreduce_ returns its argument"
    assert_equal(array, expected, "allreduce_ result")
    array = np.full(5, rank + 1, np.float64)
    handle = hvd.allreduce_async_(array, name="in.place.async")  # Average by default
    assert hvd.synchronize(handle) is array, "synchronize(allreduce_async_) returns the argument"
    assert_equal(array, np.full(5, sum(range(1, size + 1)) / size), "allreduce_async_ result")
    unnamed = np.full(3, 2.0, np.float64)
    hvd.allreduce_(unnamed, prescale_factor=0.5, postscale_factor=4.0)  # the general path: scaling, no name
    assert_equal(unnamed, np.full(3, 4.0), "allreduce_ with scaling and an automatic name")
    read_only = np.ones(3, np.float32)
    read_only.flags.writeable = False
    expect_error(ValueError, ["read-only"], hvd.allreduce_, read_only)
    expect_error(TypeError, ["ndarray", "in-place"], hvd.allreduce_, np.float32(1.0))
    column = np.ones((4, 4), np.float32)[:, 1]  # non-contiguous: reduced as a copy, written back
    assert_equal(
        hvd.synchronize(hvd.allreduce_async_(column, op=hvd.Sum)),
        np.full(4, size, np.float32),
        "allreduce_async_ of a column",
    )


def check_large_tensors(rank, size):
    """Pieces of 64 KiB and more, which take the shared-memory path on 3+ ranks of one
    host: every dtype and op, a tensor spanning several 1 MiB chunks, and a fused burst."""
    pending = PendingChecks()
    for dtype in ALL_DTYPES:
        ops = ["Sum", "Min", "Max", "Product"] if dtype == BOOL else list(OPS)
        for op_name in ops:
            inputs = inputs_for(dtype, (70000,), op_name, size)  # >= 64 KiB even for 1-byte dtypes
            what = f"large allreduce {dtype.name} {op_name}"
            handle = hvd.allreduce_async(inputs[rank], op=OPS[op_name], name=what)
            pending.add(handle, expected_reduction(inputs, dtype, op_name, size), inputs[rank], what)
    pending.check_all()
    inputs = inputs_for(np.dtype(np.float32), (300001,), "Sum", size)  # 3 chunks, the last one odd
    assert_equal(
        hvd.allreduce(inputs[rank], op=hvd.Sum, name="large.chunks"),
        expected_reduction(inputs, np.dtype(np.float32), "Sum", size),
        "multi-chunk allreduce",
    )
    burst = [inputs_for(np.dtype(np.float64), (25000 + i,), "Average", size) for i in range(8)]  # fused
    for i, inputs in enumerate(burst):
        pending.add(
            hvd.allreduce_async(inputs[rank], name=f"large.burst.{i}"),
            expected_reduction(inputs, np.dtype(np.float64), "Average", size),
            inputs[rank],
            f"burst {i}",
        )
    pending.check_all()


def check_recycled_results(rank, size):
    """Results of 128 KiB and more live in buffers the core recycles: a dropped result's
    memory serves the next one, but never while any view of it is still alive."""
    from lockstep import _core

    shape = (1 << 18,)  # 1 MiB of float32
    kept = hvd.allreduce(np.full(shape, rank + 1, np.float32), op=hvd.Sum, name="recycled")
    assert kept.flags.writeable and kept.flags.c_contiguous, kept.flags
    expected = size * (size + 1) / 2
    view = kept[5:10]
    kept_address = _core.buffer_address(kept)
    del kept
    addresses = set()
    for step in range(20):
        result = hvd.allreduce(np.full(shape, step, np.float32), op=hvd.Sum, name="recycled")
        assert_equal(result, np.full(shape, step * size, np.float32), f"recycled step {step}")
        result[:] = -1  # the user may write into a result; the next one is unaffected
        addresses.add(_core.buffer_address(result))
        del result
    assert kept_address not in addresses, "a buffer was recycled while a view of it was alive"
    assert_equal(view, np.full((5,), expected, np.float32), "a view of a recycled-size result")
    if os.environ.get("LOCKSTEP_HOST_BUFFER_CACHE_BYTES") != "0":
        assert len(addresses) == 1, f"dropped results were not recycled: {len(addresses)} buffers"
    root_data = np.arange(1 << 17, dtype=np.float64) + rank
    for _ in range(3):
        assert_equal(hvd.broadcast(root_data, 0, name="recycled.bcast"), root_data - rank, "recycled broadcast")


def check_poll(rank, size):
    big = np.full(1 << 20, rank + 1, np.float32)
    handle = hvd.allreduce_async(big, op=hvd.Sum, name="poll.big")
    deadline = time.monotonic() + 30
    while not hvd.poll(handle):
        assert time.monotonic() < deadline, "poll never reported completion"
        time.sleep(0.001)
    assert hvd.poll(handle), "poll stays True once done"
    result = hvd.synchronize(handle)
    assert_equal(result, np.full(1 << 20, size * (size + 1) / 2, np.float32), "polled allreduce")
    expect_error(ValueError, ["handle"], hvd.poll, handle)
    expect_error(ValueError, ["handle"], hvd.synchronize, handle)


def check_compression(rank, size):
    inputs = [rank_values(np.dtype(np.float32), (8,), r) for r in range(size)]
    result = hvd.allreduce(inputs[rank], op=hvd.Sum, compression=hvd.Compression.fp16, name="fp16.compressed")
    assert_equal(result, expected_reduction(inputs, np.dtype(np.float32), "Sum", size), "fp16 compression")
    result = hvd.allreduce(inputs[rank], op=hvd.Sum, compression=hvd.Compression.none, name="none.compressed")
    assert_equal(result, expected_reduction(inputs, np.dtype(np.float32), "Sum", size), "no compression")


def check_grouped(rank, size):
    shapes_dtypes = [
        ((5,), np.dtype(np.float32)),
        ((2, 3), np.dtype(np.int32)),
        ((), np.dtype(np.float64)),
        ((0,), np.dtype(np.float32)),
        ((7,), INTEGER_DTYPES[0]),
        ((4,), FLOAT_DTYPES[1]),
    ]
    for op_name in ("Sum", "Average", "Max"):
        per_tensor = [inputs_for(dtype, shape, op_name, size) for shape, dtype in shapes_dtypes]
        mine = [inputs[rank] for inputs in per_tensor]
        results = hvd.grouped_allreduce(mine, op=OPS[op_name], name=f"grouped.{op_name}")
        assert isinstance(results, list) and len(results) == len(mine), "grouped_allreduce returns a list"
        for i, (result, inputs) in enumerate(zip(results, per_tensor)):
            expected = expected_reduction(inputs, inputs[0].dtype, op_name, size)
            assert_equal(result, expected, f"grouped {op_name} member {i}")
    tensors = [np.full(3, rank + i, np.float32) for i in range(4)]
    handle = hvd.grouped_allreduce_async(tensors, op=hvd.Sum, prescale_factor=2.0)  # unnamed group
    while not hvd.poll(handle):
        time.sleep(0.001)
    for i, result in enumerate(hvd.synchronize(handle)):
        assert_equal(result, np.full(3, 2.0 * sum(r + i for r in range(size)), np.float32), f"grouped async {i}")


def check_fused_burst(rank, size):
    """Many small tensors in flight at once, which the core fuses into shared buffers."""
    pending = PendingChecks()
    for i in range(200):
        dtype = NUMERIC_DTYPES[i % len(NUMERIC_DTYPES)]
        inputs = [rank_values(dtype, (i % 13,), r, offset=i % 3) for r in range(size)]
        handle = hvd.allreduce_async(inputs[rank], op=hvd.Sum, name=f"burst.{i}")
        pending.add(handle, expected_reduction(inputs, dtype, "Sum", size), inputs[rank], f"burst {i}")
    pending.check_all()


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check(check_every_dtype_and_op, rank, size)
    check(check_scaling, rank, size)
    check(check_defaults_and_deprecated_average, rank, size)
    check(check_numpy_scalars, rank, size)
    check(check_unnamed_ops_interleaved, rank, size)
    check(check_in_place, rank, size)
    check(check_large_tensors, rank, size)
    check(check_recycled_results, rank, size)
    check(check_poll, rank, size)
    check(check_compression, rank, size)
    check(check_grouped, rank, size)
    check(check_fused_burst, rank, size)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
