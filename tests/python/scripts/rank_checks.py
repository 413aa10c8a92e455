"""Helpers shared by the rank scripts: exact inputs and expected values, strict
comparisons, and failing fast (a failed rank exits at once, so mpirun ends the job
instead of the other ranks hanging in a collective)."""

import os
import sys
import traceback

import ml_dtypes
import numpy as np
from checks import failed_checks

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = [np.dtype(np.float16), BFLOAT16, np.dtype(np.float32), np.dtype(np.float64)]
INTEGER_DTYPES = [np.dtype(t) for t in (np.uint8, np.uint16, np.int8, np.int16, np.int32, np.int64)]
NUMERIC_DTYPES = INTEGER_DTYPES + FLOAT_DTYPES
BOOL = np.dtype(np.bool_)
ALL_DTYPES = NUMERIC_DTYPES + [BOOL]


def world_rank():
    return int(os.environ["OMPI_COMM_WORLD_RANK"])


def world_size():
    return int(os.environ["OMPI_COMM_WORLD_SIZE"])


def is_signed(dtype):
    return dtype in FLOAT_DTYPES or dtype.kind == "i"


def rank_values(dtype, shape, rank, offset=0):
    """Small integer-valued inputs that differ per rank (booleans: a bit pattern
    that gives every combination across ranks), exact in every dtype."""
    count = int(np.prod(shape, dtype=np.int64))
    index = np.arange(count)
    if dtype == BOOL:
        return ((index >> rank) & 1).astype(bool).reshape(shape)
    values = index % 5 + rank + 1 + offset
    if is_signed(dtype):
        values = values - 4  # exercise negative values where the dtype has them
    return values.reshape(shape).astype(dtype)


def product_values(dtype, shape, rank):
    """Inputs of 1s and 2s (and -1s for signed dtypes) whose products stay tiny."""
    count = int(np.prod(shape, dtype=np.int64))
    index = np.arange(count)
    values = np.where((index + rank) % 3 == 0, 2, 1)
    if is_signed(dtype):
        values = np.where((index + rank) % 4 == 1, -values, values)
    return values.reshape(shape).astype(dtype)


def average_values(dtype, shape, rank, size):
    """Inputs whose mean over ranks is an integer, so Average is exact everywhere."""
    count = int(np.prod(shape, dtype=np.int64))
    values = np.arange(count) % 5 + size * rank
    if is_signed(dtype):
        values = values - 2
    return values.reshape(shape).astype(dtype)


def expected_reduction(inputs, dtype, op_name, size, prescale=1.0, postscale=1.0):
    """What Horovod computes (and lockstep must match bit for bit): prescale each
    input, reduce, then scale by postscale (divided by the size for Average), each
    scaling with horovod_scale()."""
    if dtype == BOOL:
        stacked = np.stack(inputs)
        return (stacked.any(axis=0) if op_name in ("Sum", "Max") else stacked.all(axis=0)).astype(bool)
    stacked = np.stack([horovod_scale(np.asarray(x, dtype), prescale) for x in inputs])
    if op_name in ("Sum", "Average"):
        reduced = _exact_sum(stacked, dtype)
    elif op_name == "Min":
        reduced = stacked.min(axis=0)
    elif op_name == "Max":
        reduced = stacked.max(axis=0)
    elif op_name == "Product":
        reduced = stacked.prod(axis=0).astype(dtype)
    else:
        raise ValueError(op_name)
    if op_name == "Average":
        postscale = postscale / size
    return horovod_scale(reduced.astype(dtype), postscale)


def horovod_scale(values, factor):
    """Horovod's ScaleBuffer on the CPU: float32/float64 multiply in their own
    precision by the factor rounded to it; float16 (and lockstep's bfloat16) widen
    to float32; integers multiply in float64 and truncate toward zero."""
    values = np.asarray(values)
    dtype = values.dtype
    if factor == 1.0:
        return values.copy()
    if dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        return (dtype.type(factor) * values).astype(dtype)
    if dtype in FLOAT_DTYPES:  # float16, bfloat16
        return (np.float32(factor) * values.astype(np.float32)).astype(dtype)
    return np.trunc(values.astype(np.float64) * factor).astype(dtype)


def _exact_sum(stacked, dtype):
    """The sum over ranks; the test inputs keep it exact in every dtype (integers
    wrap as MPI's do)."""
    if dtype in FLOAT_DTYPES:
        return stacked.astype(np.float64).sum(axis=0)
    return stacked.sum(axis=0, dtype=stacked.dtype)


def alltoall_rows(dtype, sender, splits):
    """What `sender` sends in an alltoall with `splits`: for each destination, that many
    rows of [sender, destination]."""
    rows = [np.full((count, 2), [sender, destination]) for destination, count in enumerate(splits)]
    return np.concatenate(rows).astype(dtype) if dtype != np.bool_ else np.concatenate(rows) % 2 == 1


def rows_for(sent, splits, destination):
    """The rows of `sent` (cut by `splits`) that go to `destination`."""
    start = sum(splits[:destination])
    return sent[start : start + splits[destination]]


def assert_equal(actual, expected, what):
    """Same type, dtype, shape and exact values."""
    assert isinstance(actual, np.ndarray), f"{what}: expected a numpy array, got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    got, want = _comparable(actual), _comparable(expected)
    if not np.array_equal(got, want):
        where = tuple(int(i) for i in np.argwhere(got != want)[0]) if got.ndim else ()
        raise AssertionError(
            f"{what}: values differ, first at index {where}: got {got[where]}, expected {want[where]}\n"
            f"got      {got.ravel()[:12]}\nexpected {want.ravel()[:12]}"
        )


def _comparable(array):
    return array.astype(np.float64) if array.dtype in FLOAT_DTYPES else np.asarray(array)


def expect_error(error_types, fragments, function, *args, **kwargs):
    """Call function, assert it raises one of error_types with every fragment in
    its message, and return the exception."""
    try:
        function(*args, **kwargs)
    except error_types as error:
        message = str(error)
        for fragment in fragments:
            assert fragment.lower() in message.lower(), (
                f"{getattr(function, '__name__', function)} raised {type(error).__name__}({message!r}), "
                f"which does not mention {fragment!r}"
            )
        return error
    raise AssertionError(f"{getattr(function, '__name__', function)}{args} did not raise {error_types}")


def run_main(main):
    """Run main(); on any failure print the traceback and exit non-zero at once.
    Named checks (checks.check) that failed were reported as they failed and the
    script went on: it ends with a FAILED line instead of ALL CHECKS PASSED, but exit
    status 0, since a non-zero one makes mpirun kill the other ranks before they
    report their checks. Refuses to run under python -O (PYTHONOPTIMIZE), which
    strips every assert."""
    try:
        if not __debug__:
            raise SystemExit("rank checks are assert statements: run without python -O / PYTHONOPTIMIZE")
        main()
    except BaseException:  # also SystemExit/KeyboardInterrupt: never leave peers waiting
        print(f"rank {os.environ.get('OMPI_COMM_WORLD_RANK')}: FAILED", flush=True)
        traceback.print_exc()
        _exit(1)
    if failed_checks():
        print(f"rank {world_rank()}: FAILED checks: {', '.join(failed_checks())}", flush=True)
        _exit(0)
    print(f"rank {world_rank()}: ALL CHECKS PASSED", flush=True)


def _exit(status):
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
