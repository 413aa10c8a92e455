"""Every public function of a frontend, called with each of its arguments replaced
in turn by each of a list of bad values: each call either works (then its result is
checked where the value's meaning is clear: a name, root rank or compression that
is accepted must not change the result, an accepted scale factor must scale it) or
raises a clear error of the library's kinds
(TypeError, ValueError, the LockstepError family, NotImplementedError); never a crash,
a hang, or another exception type (AttributeError, KeyError, OverflowError, ...).
Collectives keep working afterwards.

    bad_input.py numpy|torch

Every rank makes the same calls with the same values, so a call accepted on one rank
is accepted on all and its collective completes.
"""

import inspect
import math
import numbers
import sys
import threading

import numpy as np
from checks import check
from rank_checks import expect_error, run_main

FRONTEND = sys.argv[1] if len(sys.argv) > 1 else "numpy"
if FRONTEND == "torch":
    import torch
    import torch_checks  # noqa: F401 - one thread per rank before torch loads

    import lockstep.torch as hvd
else:
    import lockstep.numpy as hvd

CLEAR_ERRORS = (TypeError, ValueError, RuntimeError, NotImplementedError)
# Functions that take no arguments, change the process's state, or write files
# (process sets: tests/python/test_process_sets.py covers their bad arguments).
SKIPPED = {
    "init",
    "shutdown",
    "join",
    "barrier",
    "start_timeline",
    "stop_timeline",
    "SyncBatchNorm",
    "is_initialized",
    "add_process_set",
    "remove_process_set",
}


def tensor(values=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), dtype="float32"):
    array = np.asarray(values, dtype=dtype)
    return torch.from_numpy(array.copy()) if FRONTEND == "torch" else array


def bad_values():
    values = {
        "None": None,
        "str": "x",
        "empty str": "",
        "negative int": -1,
        "huge int": 2**70,
        "float": 1.5,
        "nan": math.nan,
        "inf": math.inf,
        "bool": True,
        "list": [1, 2],
        "nested list": [[1], [2, 3]],
        "dict": {"a": 1},
        "object": object(),
        "bytes": b"ab",
        "function": len,
        "lock": threading.Lock(),
        "complex array": np.ones(3, np.complex64),
        "uint32 array": np.ones(3, np.uint32),
        "0-d array": np.array(1.0, np.float32),
        "empty array": np.ones((0, 3), np.float32),
        "3-d array": np.ones((2, 3, 4), np.float32),
        "numpy int": np.int64(1),
        "negative numpy": np.int32(-5),
    }
    if FRONTEND == "torch":
        values.update(
            {
                "complex tensor": torch.ones(3, dtype=torch.complex64),
                "0-d tensor": torch.tensor(1.0),
                "empty tensor": torch.ones(0, 3),
                "sparse tensor": torch.ones(2, 2).to_sparse(),
                "grad leaf": torch.ones(3, requires_grad=True),
                "meta tensor": torch.empty(3, device="meta"),
                "int tensor": torch.tensor([1, 2], dtype=torch.int32),
            }
        )
    return values


def good_arguments(size):
    """For each function under test: a function making good (args, kwargs)."""
    t = tensor
    rows = lambda: tensor(np.arange(size * 2 * 3), "float32").reshape(size * 2, 3)  # noqa: E731
    common = {
        "allreduce": lambda: (
            (t(),),
            {
                "name": None,
                "op": hvd.Sum,
                "prescale_factor": 1.0,
                "postscale_factor": 1.0,
                "compression": hvd.Compression.none,
            },
        ),
        "allreduce_async": lambda: (
            (t(),),
            {
                "name": None,
                "op": hvd.Sum,
                "prescale_factor": 1.0,
                "postscale_factor": 1.0,
                "compression": hvd.Compression.none,
            },
        ),
        "allreduce_": lambda: ((t(),), {"name": None, "op": hvd.Sum, "prescale_factor": 1.0, "postscale_factor": 1.0}),
        "allreduce_async_": lambda: ((t(),), {"name": None, "op": hvd.Sum}),
        "grouped_allreduce": lambda: (([t(), t()],), {"name": None, "op": hvd.Sum}),
        "grouped_allreduce_async": lambda: (([t(), t()],), {"name": None, "op": hvd.Sum}),
        "allgather": lambda: ((rows(),), {"name": None}),
        "allgather_async": lambda: ((rows(),), {"name": None}),
        "broadcast": lambda: ((t(), 0), {"name": None}),
        "broadcast_async": lambda: ((t(), 0), {"name": None}),
        "alltoall": lambda: ((rows(),), {"splits": [2] * size, "name": None}),
        "alltoall_async": lambda: ((rows(),), {"splits": [2] * size, "name": None}),
        "reducescatter": lambda: ((rows(),), {"name": None, "op": hvd.Sum}),
        "reducescatter_async": lambda: ((rows(),), {"name": None, "op": hvd.Sum}),
        "broadcast_object": lambda: (({"a": 1},), {"root_rank": 0, "name": None}),
        "allgather_object": lambda: (({"a": 1},), {"name": None}),
        "poll": lambda: ((hvd.allreduce_async(t(), name=None),), {}),
        "synchronize": lambda: ((hvd.allreduce_async(t(), name=None),), {}),
        "grouped_allgather": lambda: (([rows(), rows()],), {"name": None}),
        "grouped_allgather_async": lambda: (([rows(), rows()],), {"name": None}),
        "grouped_reducescatter": lambda: (([rows(), rows()],), {"name": None, "op": hvd.Sum}),
        "grouped_reducescatter_async": lambda: (([rows(), rows()],), {"name": None, "op": hvd.Sum}),
    }
    if FRONTEND == "torch":
        common.update(
            {
                "broadcast_": lambda: ((t(), 0), {"name": None}),
                "broadcast_async_": lambda: ((t(), 0), {"name": None}),
                "grouped_allreduce_": lambda: (([t(), t()],), {"name": None, "op": hvd.Sum}),
                "grouped_allreduce_async_": lambda: (([t(), t()],), {"name": None, "op": hvd.Sum}),
                "sparse_allreduce_async": lambda: ((t().reshape(2, 3).to_sparse(), "sparse.in"), {"op": hvd.Sum}),
                "broadcast_parameters": lambda: (({"w": t()},), {"root_rank": 0}),
                "broadcast_optimizer_state": lambda: ((_optimizer(),), {"root_rank": 0}),
                "DistributedOptimizer": lambda: (
                    (_optimizer(),),
                    {
                        "named_parameters": None,
                        "compression": hvd.Compression.none,
                        "backward_passes_per_step": 1,
                        "op": hvd.Average,
                        "gradient_predivide_factor": 1.0,
                    },
                ),
            }
        )
    return common


def _optimizer():
    return torch.optim.SGD([torch.nn.Parameter(torch.ones(3))], lr=0.1)


def _only_accepted_keywords(function, make):
    """`make` without the keywords `function` does not take (frontends differ, as in
    Horovod: torch's allreduce_async has no compression)."""
    accepted = inspect.signature(function).parameters

    def made():
        args, kwargs = make()
        return args, {key: value for key, value in kwargs.items() if key in accepted}

    return made


def finish(result):
    """Wait for what an accepted call started, so nothing is left in flight; returns
    the call's result (an async call's: what synchronize returns)."""
    if isinstance(result, int) and not isinstance(result, bool):
        try:
            return hvd.synchronize(result)
        except KeyError:
            raise
        except CLEAR_ERRORS:
            return UNCOMPARABLE
    return result


# Accepted values of these parameters must leave the result as the good arguments
# make it: every rank broadcasts the same tensor, so the root does not matter either.
VALUE_NEUTRAL = {"name", "root_rank", "compression"}
SCALE_FACTORS = {"prescale_factor", "postscale_factor"}
UNCOMPARABLE = object()


def comparable(result):
    """`result` as numpy arrays and plain values (lists for sequences), or UNCOMPARABLE."""
    if FRONTEND == "torch" and isinstance(result, torch.Tensor):
        result = result.detach().to_dense() if result.is_sparse else result.detach()
        return result.numpy().copy()
    if isinstance(result, np.ndarray):
        return result.copy()
    if isinstance(result, (list, tuple)):
        items = [comparable(item) for item in result]
        return UNCOMPARABLE if any(item is UNCOMPARABLE for item in items) else items
    if isinstance(result, dict):
        return {key: comparable(value) for key, value in result.items()}
    if result is None or isinstance(result, (bool, int, float, str)):
        return result
    return UNCOMPARABLE


def same(actual, expected):
    if isinstance(expected, np.ndarray):
        return (
            isinstance(actual, np.ndarray)
            and actual.shape == expected.shape
            and np.allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=1e-6, equal_nan=True)
        )
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(same(actual[key], expected[key]) for key in expected)
        )
    return actual == expected


def scaled(result, factor):
    if isinstance(result, np.ndarray):
        return result.astype(np.float64) * factor
    return [scaled(item, factor) for item in result]


def wrong_result(parameter, value, good, result):
    """(checked, problem): whether an accepted call's result could be checked, and
    what is wrong with it (None if nothing)."""
    if good is UNCOMPARABLE or result is UNCOMPARABLE:
        return False, None
    if parameter in VALUE_NEUTRAL:
        expected = good
    elif parameter in SCALE_FACTORS and isinstance(value, numbers.Real) and isinstance(good, (np.ndarray, list)):
        expected = scaled(good, float(value))
    else:
        return False, None
    return True, None if same(result, expected) else f"result {result!r}, expected {expected!r}"


def sweep(rank, size):
    functions = good_arguments(size)
    public = {
        name
        for name in dir(hvd)
        if not name.startswith("_") and callable(getattr(hvd, name)) and not isinstance(getattr(hvd, name), type)
    } - SKIPPED
    untested = sorted(
        name
        for name in public - set(functions)
        if getattr(getattr(hvd, name), "__module__", "").startswith("lockstep")
        and inspect.signature(getattr(hvd, name)).parameters
    )
    assert not untested, f"public functions with arguments this sweep does not cover: {untested}"
    problems, calls, accepted, checked = [], 0, 0, 0
    for name, make in sorted(functions.items()):
        function = getattr(hvd, name)
        make = _only_accepted_keywords(function, make)
        args, kwargs = make()
        good = comparable(finish(function(*args, **kwargs)))  # the good arguments work
        parameters = [
            p
            for p in inspect.signature(function).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        for index, parameter in enumerate(parameters):
            for label, value in bad_values().items():
                args, kwargs = make()
                args = list(args)
                if index < len(args):
                    args[index] = value
                else:
                    kwargs[parameter.name] = value
                calls += 1
                try:
                    result = comparable(finish(function(*args, **kwargs)))
                    accepted += 1
                    was_checked, problem = wrong_result(parameter.name, value, good, result)
                    checked += was_checked
                    if problem:
                        problems.append(f"{name}({parameter.name}={label}) accepted, but {problem}")
                except CLEAR_ERRORS as error:
                    if not str(error):
                        problems.append(f"{name}({parameter.name}={label}): {type(error).__name__} with no message")
                except Exception as error:  # noqa: BLE001 - anything else is the finding
                    problems.append(f"{name}({parameter.name}={label}): {type(error).__name__}: {error}")
        check_still_working(rank, size, name)
    if problems:
        raise AssertionError("unclear errors or wrong results:\n" + "\n".join(problems))
    if checked == 0:
        raise AssertionError("no accepted call had its result checked")
    print(
        f"rank {rank}: {FRONTEND}: {calls} calls with bad arguments, {accepted} accepted "
        f"({checked} results checked), {calls - accepted} clear errors",
        flush=True,
    )


def check_still_working(rank, size, after):
    total = hvd.allreduce(tensor([rank] * 3), op=hvd.Sum, name=f"still.working.{after}")
    got = total.numpy() if FRONTEND == "torch" else total
    assert np.array_equal(got, np.full(3, sum(range(size)), np.float32)), f"allreduce after {after}: {got}"


def check_unpicklable_object_on_one_rank(rank, size):
    """Only rank 1's object cannot be pickled: every rank fails, none waits forever."""
    obj = threading.Lock() if rank == 1 else {"rank": rank}
    expect_error((TypeError, ValueError), ["pickle"], hvd.allgather_object, obj)
    expect_error((TypeError, ValueError), ["pickle"], hvd.broadcast_object, obj, root_rank=1)
    assert hvd.allgather_object(rank) == list(range(size)), "allgather_object afterwards"


def check_in_flight_name_and_read_only(rank, size):
    handle = hvd.allreduce_async(tensor(), name="dup.in.flight")
    expect_error(ValueError, ["dup.in.flight"], hvd.allreduce_async, tensor(), name="dup.in.flight")
    hvd.synchronize(handle)
    if FRONTEND == "numpy":
        read_only = tensor()
        read_only.flags.writeable = False
        expect_error(ValueError, ["read-only"], hvd.allreduce_, read_only)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check(check_unpicklable_object_on_one_rank, rank, size)
    check(check_in_flight_name_and_read_only, rank, size)
    check("bad_arguments_to_every_public_function", sweep, rank, size)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
