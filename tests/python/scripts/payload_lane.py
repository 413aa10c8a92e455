"""Small allreduces that ride with negotiation's bits (the payload lane) give the data
path's bits exactly: every dtype and op numpy supports, at 1 element, exactly a full
lane and one element over, with pre/postscale and Average, wrapping small integers,
a rank submitting late, ranks carrying different tensors, NaNs and zeros, a 2-rank
process set inside a larger job.

Each case runs twice under one name: the first call is negotiated in full and always
takes the data collective, the second comes from the response cache and rides where
it can; the two must agree bit for bit. Each behaviour is a named check
(scripts/checks.py). Rank r writes every second result, by check and case, to
OUTDIR/results.<r>.pickle (the test compares a run with the lane against one
without) and rank 0 writes OUTDIR/expected_rides.json: by check, the names that
must have ridden (the test reads which did from rank 0's timeline).

    payload_lane.py OUTDIR      (LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES picks the lane)
"""

import json
import os
import pickle
import sys
import time

import numpy as np
from checks import check
from rank_checks import ALL_DTYPES, BOOL, FLOAT_DTYPES, assert_equal, run_main

import lockstep.numpy as hvd

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}
LANE_BYTES = int(os.environ.get("LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES", "64"))
SIZES_FOR = 64  # element counts around a 64-byte lane, whatever this run's lane is


def inputs_for(dtype, count, op_name, rank, seed):
    """Per-rank values that make the cases bite: full-range integers (sums and
    products wrap), floats of mixed magnitude (sums round), never NaN or zero, so
    that every eligible case rides (the fallbacks are their own cases)."""
    rng = np.random.default_rng([seed, rank])
    if dtype == BOOL:
        return rng.integers(0, 2, count).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, count, dtype=np.int64, endpoint=True).astype(dtype)
    magnitude = 1.0 if op_name == "Product" else 10.0 ** rng.integers(-3, 4, count)
    values = rng.uniform(0.5, 1.5, count) * magnitude * rng.choice([-1.0, 1.0], count)
    return values.astype(dtype)


def may_ride(dtype, op_name, count, set_size, contributions):
    """Where the lane must carry a case: it fits, and no order of combining shows
    (integers and bool always; floats' Min/Max without NaN or zero; floats' sums and
    products with at most 2 ranks and no NaN)."""
    if LANE_BYTES == 0 or count < 1 or count * dtype.itemsize > LANE_BYTES:
        return False
    if dtype not in FLOAT_DTYPES:
        return True
    stacked = np.stack(contributions).astype(np.float64)
    if np.isnan(stacked).any():
        return False
    if op_name in ("Min", "Max"):
        return not (stacked == 0).any()
    return set_size <= 2


class Cases:
    def __init__(self, rank, size):
        self.rank, self.size = rank, size
        self.results, self.expected_rides = {}, []

    def run(self, name, inputs, op_name, prescale=1.0, postscale=1.0, process_set=None, set_size=None, late=False):
        """inputs[r]: rank r's tensor (inputs[self.rank] is ours)."""
        mine = inputs[self.rank]
        kwargs = dict(op=OPS[op_name], name=name, prescale_factor=prescale, postscale_factor=postscale)
        if process_set is not None:
            kwargs["process_set"] = process_set
        first = hvd.allreduce(mine, **kwargs)  # negotiated in full: the data collective
        if late and self.rank == self.size - 1:
            time.sleep(0.05)  # the others wait with the tensor ready, carrying it alone
        second = hvd.allreduce(mine, **kwargs)  # from the cache: rides where it can
        assert second.dtype == first.dtype and second.shape == first.shape, name
        if first.tobytes() != second.tobytes():  # NaNs included, which compare unequal as values
            assert_equal(second, first, f"{name}: riding and the data path differ")
            raise AssertionError(f"{name}: riding and the data path differ in bits: {second!r} {first!r}")
        self.results[name] = (str(second.dtype), second.shape, second.tobytes())
        contributions = [_prescaled(x, prescale) for x in inputs]
        if may_ride(mine.dtype, op_name, mine.size, set_size or self.size, contributions):
            self.expected_rides.append(name)
        return second


def _prescaled(values, factor):
    if factor == 1.0 or values.dtype == BOOL:
        return values
    if values.dtype in FLOAT_DTYPES:
        return (np.float32(factor) * values.astype(np.float32)).astype(values.dtype)
    return np.trunc(values.astype(np.float64) * factor)


def check_every_dtype_op_and_size(rank, size):
    cases = Cases(rank, size)
    seed = 0
    for dtype in ALL_DTYPES:
        full = SIZES_FOR // dtype.itemsize
        ops = ["Sum", "Min", "Max", "Product"] if dtype == BOOL else list(OPS)
        for op_name in ops:
            for count in (1, full, full + 1):
                scalings = [(1.0, 1.0)]
                if dtype != BOOL and op_name in ("Sum", "Average"):
                    scalings.append((0.5, 3.0) if dtype.kind in "iu" else (0.3, 7.0))
                for prescale, postscale in scalings:
                    seed += 1
                    inputs = [inputs_for(dtype, count, op_name, r, seed) for r in range(size)]
                    name = f"lane.{dtype.name}.{op_name}.{count}.{prescale}.{postscale}"
                    cases.run(name, inputs, op_name, prescale, postscale)
    return cases


def check_fallbacks(rank, size):
    cases = Cases(rank, size)
    # NaN on one rank: its lane stays empty, so the sum takes the data path.
    nan = [np.array([1.0, 2.0], np.float32) for _ in range(size)]
    nan[size - 1][1] = np.nan
    cases.run("lane.nan_sum", nan, "Sum")
    # Zeros of both signs: Max could return either, so it does not ride.
    zeros = [np.array([-0.0 if r % 2 else 0.0, 3.0], np.float64) for r in range(size)]
    cases.run("lane.zero_max", zeros, "Max")
    return cases


def check_late_rank(rank, size):
    cases = Cases(rank, size)
    # One rank submits late: the others wait carrying it, and it rides once all have it.
    late = [np.full(4, 100 + r, np.int8) for r in range(size)]
    out = cases.run("lane.late", late, "Sum", late=True)
    assert_equal(out, np.full(4, sum(100 + r for r in range(size)) % 256, np.uint8).view(np.int8), "late")
    return cases


def check_ranks_carrying_different_tensors(rank, size):
    # Rank 0 has a before b, the others b before a; the lane empties while they
    # disagree and the results stay exact.
    a = [np.array([r + 1], np.int32) for r in range(size)]
    b = [np.array([10 * (r + 1)], np.int32) for r in range(size)]
    for _ in range(3):
        order = [("lane.cross.a", a), ("lane.cross.b", b)]
        if rank != 0:
            order.reverse()
        first = hvd.allreduce_async(order[0][1][rank], op=hvd.Sum, name=order[0][0])
        time.sleep(0.02)
        second = hvd.allreduce_async(order[1][1][rank], op=hvd.Sum, name=order[1][0])
        assert_equal(hvd.synchronize(first), np.array([sum(x[0] for x in order[0][1])], np.int32), "cross first")
        assert_equal(hvd.synchronize(second), np.array([sum(x[0] for x in order[1][1])], np.int32), "cross second")


def check_in_place(rank, size):
    # Through allreduce_.
    in_place = [np.array([1.25 * (r + 1), -3.5], np.float32) for r in range(size)]
    buffer = in_place[rank].copy()
    hvd.allreduce_(buffer, op=hvd.Max, name="lane.in_place")
    hvd.allreduce_(buffer, op=hvd.Max, name="lane.in_place")
    assert_equal(buffer, np.array([1.25 * size, -3.5], np.float32), "in place")


def check_two_rank_set(rank, size):
    """A float sum rides on a set of 2 inside a job of 3 (the set's own exchange, and
    the 2-rank rule counts the set's ranks)."""
    cases = Cases(rank, size)
    pair = hvd.add_process_set([0, 1])
    if rank <= 1:
        inputs = [np.array([0.1, 1e8, -7.25], np.float32) * (r + 1) for r in range(2)]
        cases.run("lane.pair.sum", inputs, "Sum", process_set=pair, set_size=2)
    hvd.remove_process_set(pair)
    return cases


def main():
    out_dir = sys.argv[1]
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    # The cases of each check that ran them (a check left out or failed returns None).
    cases = {
        "every_dtype_op_and_size": check(check_every_dtype_op_and_size, rank, size),
        "fallbacks": check(check_fallbacks, rank, size),
        "late_rank": check(check_late_rank, rank, size),
    }
    check(check_ranks_carrying_different_tensors, rank, size)
    check(check_in_place, rank, size)
    if size >= 3:
        cases["two_rank_set"] = check(check_two_rank_set, rank, size)
    cases = {name: ran for name, ran in cases.items() if ran is not None}
    hvd.shutdown()  # closes rank 0's timeline
    with open(os.path.join(out_dir, f"results.{rank}.pickle"), "wb") as stream:
        pickle.dump({name: ran.results for name, ran in cases.items()}, stream)
    if rank == 0:
        with open(os.path.join(out_dir, "expected_rides.json"), "w") as stream:
            json.dump({name: ran.expected_rides for name, ran in cases.items()}, stream)


if __name__ == "__main__":
    run_main(main)
