"""Errors a user can cause: each must raise a clear error naming the problem on
every rank, without a hang, and collectives must work correctly afterwards."""

import numpy as np
from checks import check
from rank_checks import BFLOAT16, assert_equal, expect_error, run_main

import lockstep.numpy as hvd

LockstepError = hvd.LockstepError


def check_still_working(rank, size, after):
    result = hvd.allreduce(np.full(3, rank + 1, np.float32), op=hvd.Sum)  # unnamed: names must still line up
    assert_equal(result, np.full(3, size * (size + 1) / 2, np.float32), f"allreduce after {after}")


def check_mismatches(rank, size):
    odd = rank == size - 1  # one rank disagrees with the rest
    cases = [
        (
            "mismatch.shape",
            ["shape"],
            lambda: hvd.allreduce(np.ones(4 if odd else 3, np.float32), name="mismatch.shape"),
        ),
        (
            "mismatch.dtype",
            ["data type"],
            lambda: hvd.allreduce(np.ones(3, np.int32 if odd else np.float32), name="mismatch.dtype"),
        ),
        (
            "mismatch.op",
            ["reduce op"],
            lambda: hvd.allreduce(np.ones(3, np.float32), name="mismatch.op", op=hvd.Max if odd else hvd.Sum),
        ),
        (
            "mismatch.prescale",
            ["prescale"],
            lambda: hvd.allreduce(
                np.ones(3, np.float32), name="mismatch.prescale", prescale_factor=2.0 if odd else 1.0
            ),
        ),
        (
            "mismatch.root",
            ["root"],
            lambda: hvd.broadcast(np.ones(3, np.float32), root_rank=1 if odd else 0, name="mismatch.root"),
        ),
        (
            "mismatch.kind",
            ["operation"],
            lambda: (hvd.allgather if odd else hvd.allreduce)(np.ones(3, np.float32), name="mismatch.kind"),
        ),
        (
            "mismatch.rows",
            ["shape"],
            lambda: hvd.allgather(np.ones((2, 3 if odd else 2), np.float32), name="mismatch.rows"),
        ),
        (
            "mismatch.scatter",
            ["shape"],
            lambda: hvd.reducescatter(np.ones((4 if odd else size, 2), np.float32), name="mismatch.scatter"),
        ),
    ]
    for name, fragments, submit in cases:
        expect_error(LockstepError, [name] + fragments, submit)
        check_still_working(rank, size, name)


def check_name_in_flight(rank, size):
    """Reusing a name while it is in flight is refused at submission.

    A gate op orders the steps so each duplicate is attempted while its first
    submission provably cannot have completed: the others submit "busy.b" only
    after the gate, and rank 0 submits "busy.a" only after it."""
    data = np.full(2, rank, np.float32)
    first, second = ("busy.b", "busy.a") if rank == 0 else ("busy.a", "busy.b")
    first_handle = hvd.allreduce_async(data, op=hvd.Sum, name=first)
    expect_error(LockstepError, [first], hvd.allreduce_async, data, op=hvd.Sum, name=first)
    hvd.allreduce(data, name="busy.gate")
    second_handle = hvd.allreduce_async(data, op=hvd.Sum, name=second)
    for handle, name in [(first_handle, first), (second_handle, second)]:
        assert_equal(hvd.synchronize(handle), np.full(2, sum(range(size)), np.float32), f"{name} after the refusal")
    again = hvd.allreduce(data, op=hvd.Sum, name="busy.a")  # completed names may be reused
    assert_equal(again, np.full(2, sum(range(size)), np.float32), "reusing a completed name")


def check_wrong_types(rank, size):
    good = np.ones(3, np.float32)
    expect_error(TypeError, ["numpy", "list"], hvd.allreduce, [1.0, 2.0])
    expect_error(TypeError, ["numpy", "float"], hvd.allreduce, 1.5)
    expect_error(TypeError, ["name"], hvd.allreduce, good, name=5)
    expect_error(ValueError, ["name"], hvd.allreduce, good, name="")
    expect_error(TypeError, ["op"], hvd.allreduce, good, op="sum")
    expect_error(ValueError, ["reduce op"], hvd.allreduce, good, op=17)
    if size & (size - 1):  # Horovod's error where Adasum cannot run
        expect_error(NotImplementedError, ["adasum", "power-of-2"], hvd.allreduce, good, op=hvd.Adasum)
    else:
        expect_error(ValueError, ["adasum", "floating-point"], hvd.allreduce, np.ones(2, np.int32), op=hvd.Adasum)
    expect_error(TypeError, ["prescale_factor"], hvd.allreduce, good, prescale_factor="2")
    expect_error(ValueError, ["postscale_factor"], hvd.allreduce, good, postscale_factor=float("nan"))
    expect_error(ValueError, ["bool"], hvd.allreduce, np.ones(3, bool), op=hvd.Sum, prescale_factor=2.0)
    expect_error(ValueError, ["bool", "average"], hvd.allreduce, np.ones(3, bool))
    expect_error(TypeError, ["root_rank"], hvd.broadcast, good, root_rank=1.0)
    expect_error(ValueError, ["root_rank", str(size)], hvd.broadcast, good, root_rank=size)
    expect_error(ValueError, ["root_rank"], hvd.broadcast, good, root_rank=-1)
    expect_error(ValueError, ["splits"], hvd.alltoall, np.ones(3, np.float32), splits=[1] * (size + 1))
    expect_error(ValueError, ["splits", "sum"], hvd.alltoall, np.ones(3, np.float32), splits=[5] + [0] * (size - 1))
    expect_error(ValueError, ["negative"], hvd.alltoall, np.ones(3, np.float32), splits=[4, -1] + [0] * (size - 2))
    expect_error(TypeError, ["splits"], hvd.alltoall, good, splits=[1.5] * size)
    expect_error(ValueError, ["divisible"], hvd.alltoall, np.ones(size + 1, np.float32))
    expect_error(ValueError, ["dimension"], hvd.allgather, np.float32(1.0))
    expect_error(ValueError, ["dimension"], hvd.reducescatter, np.array(1.0, np.float32))
    expect_error(ValueError, ["reducescatter", "max"], hvd.reducescatter, np.ones((size, 2), np.float32), op=hvd.Max)
    expect_error(TypeError, ["list"], hvd.grouped_allreduce, good)
    expect_error(ValueError, ["at least one"], hvd.grouped_allreduce, [])
    expect_error(TypeError, ["tensors[1]"], hvd.grouped_allreduce, [good, [1.0]])
    expect_error(ValueError, ["comm"], hvd.init, comm=[0, 1])
    expect_error(TypeError, ["handle"], hvd.synchronize, "not a handle")
    expect_error(ValueError, ["handle"], hvd.synchronize, 10**9)
    check_still_working(rank, size, "wrong argument types")


def check_unsupported_dtypes(rank, size):
    arrays = {
        "complex64": np.ones(3, np.complex64),
        "object": np.array([1, "a", None], dtype=object),
        "<U": np.array(["ab", "c"]),
        "uint32": np.ones(3, np.uint32),
        "uint64": np.ones(3, np.uint64),
        ">i4": np.ones(3, dtype=">i4"),
    }
    for label, array in arrays.items():
        for submit in (hvd.allreduce, hvd.allgather, lambda a: hvd.broadcast(a, 0)):
            error = expect_error(TypeError, ["dtype", label], submit, array)
            for supported in ("uint8", "int64", "float16", "bfloat16", "float32", "bool"):
                assert supported in str(error), f"the dtype error lists {supported}: {error}"
    check_still_working(rank, size, "unsupported dtypes")


def check_non_contiguous(rank, size):
    """Non-contiguous inputs are copied and work; in-place ops on non-contiguous
    arrays write the result back through the view; read-only in-place targets are
    refused."""
    base = np.arange(24, dtype=np.float32).reshape(4, 6) + rank
    total = sum(np.arange(24, dtype=np.float32).reshape(4, 6) + r for r in range(size))
    for label, view, want in [
        ("strided", base[:, ::2], total[:, ::2]),
        ("transposed", base.T, total.T),
        ("reversed", base[::-1], total[::-1]),
    ]:
        untouched = view.copy()
        assert_equal(hvd.allreduce(view, op=hvd.Sum, name=f"nc.{label}"), want, f"allreduce of a {label} view")
        assert_equal(view, untouched, f"the {label} input is untouched")
        assert_equal(
            hvd.allgather(view, name=f"nc.gather.{label}"),
            np.concatenate([view - rank + r for r in range(size)]),
            f"allgather of a {label} view",
        )
        assert_equal(hvd.broadcast(view, 0, name=f"nc.bcast.{label}"), view - rank, f"broadcast of a {label} view")
    target = np.zeros((4, 6), np.int32)
    view = target[:, 1::2]
    view[...] = rank + 1
    assert hvd.allreduce_(view, op=hvd.Sum, name="nc.inplace") is view, "allreduce_ returns its argument"
    assert (target[:, 1::2] == size * (size + 1) // 2).all() and (target[:, ::2] == 0).all(), target
    view[...] = rank
    assert hvd.synchronize(hvd.allreduce_async_(view, op=hvd.Max, name="nc.inplace.async")) is view
    assert (target[:, 1::2] == size - 1).all() and (target[:, ::2] == 0).all(), target
    readonly = np.full(3, rank, np.int32)
    readonly.flags.writeable = False
    result = hvd.allreduce(readonly, op=hvd.Sum, name="readonly.input")
    assert_equal(result, np.full(3, sum(range(size)), np.int32), "read-only inputs are fine")
    assert result.flags.writeable, "results are writeable"
    expect_error(ValueError, ["read-only"], hvd.allreduce_, readonly)
    expect_error(ValueError, ["read-only"], hvd.allreduce_async_, readonly[::2])
    check_still_working(rank, size, "non-contiguous arrays")


def check_bfloat16_roundtrip(rank, size):
    values = np.array([0.5, -1.5, 3.0], dtype=BFLOAT16)
    assert_equal(hvd.broadcast(values, 0, name="bf16.roundtrip"), values, "bfloat16 broadcast keeps values")


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check(check_mismatches, rank, size)
    check(check_name_in_flight, rank, size)
    check(check_wrong_types, rank, size)
    check(check_unsupported_dtypes, rank, size)
    check(check_non_contiguous, rank, size)
    check(check_bfloat16_roundtrip, rank, size)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
