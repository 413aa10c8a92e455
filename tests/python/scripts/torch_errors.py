"""Errors a user can cause with lockstep.torch: use before init, mismatches across
ranks, names in flight, unsupported dtypes and devices, bad arguments, and
DistributedOptimizer / broadcast misuse. Each is a clear error on the rank that
caused it (or on every rank, for mismatches), and collectives work afterwards."""

import os

import numpy as np
import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from rank_checks import expect_error
from torch import nn
from torch_checks import assert_tensor_equal

import lockstep.torch as hvd
from lockstep.torch import mpi_ops

NOT_INITIALIZED = (hvd.NotInitializedError, ValueError)


def before_init():
    expect_error(NOT_INITIALIZED, ["init"], hvd.allreduce, torch.ones(2))
    expect_error(NOT_INITIALIZED, ["init"], hvd.allreduce_async_, torch.ones(2))
    expect_error(NOT_INITIALIZED, ["init"], hvd.allgather, torch.ones(2))
    expect_error(NOT_INITIALIZED, ["init"], hvd.broadcast_, torch.ones(2), 0)
    expect_error(NOT_INITIALIZED, ["init"], hvd.rank)
    expect_error(NOT_INITIALIZED, ["init"], hvd.broadcast_parameters, {"w": torch.ones(2)}, 0)
    expect_error(NOT_INITIALIZED, ["init"], hvd.broadcast_object, {"a": 1})
    expect_error(
        NOT_INITIALIZED, ["init"], hvd.DistributedOptimizer, torch.optim.SGD([nn.Parameter(torch.ones(2))], lr=0.1)
    )
    expect_error(NOT_INITIALIZED, ["init"], hvd.SyncBatchNorm(3), torch.ones(4, 3))


def check_still_working(rank, size, after):
    result = hvd.allreduce(torch.full((3,), float(rank + 1)), op=hvd.Sum)  # unnamed: names must still line up
    assert_tensor_equal(result, torch.full((3,), size * (size + 1) / 2), f"allreduce after {after}")


def check_mismatches_across_ranks(rank, size):
    odd = rank == size - 1  # one rank disagrees with the rest
    cases = [
        ("torch.mismatch.shape", ["shape"], lambda name: hvd.allreduce(torch.ones(4 if odd else 3), name=name)),
        (
            "torch.mismatch.dtype",
            ["data type"],
            lambda name: hvd.allreduce(torch.ones(3, dtype=torch.int32 if odd else torch.float32), name=name),
        ),
        ("torch.mismatch.rows", ["shape"], lambda name: hvd.allgather(torch.ones(2, 3 if odd else 2), name=name)),
        ("torch.mismatch.inplace", ["shape"], lambda name: hvd.allreduce_(torch.ones(2 if odd else 5), name=name)),
        ("torch.mismatch.broadcast", ["shape"], lambda name: hvd.broadcast_(torch.ones(1 if odd else 2), 0, name=name)),
    ]
    for name, fragments, submit in cases:
        expect_error(hvd.LockstepError, [name] + fragments, submit, name)
        check_still_working(rank, size, name)
    model = nn.Linear(3, 2 if odd else 3)  # a different model on one rank
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    model(torch.ones(1, 3)).sum().backward()
    expect_error(hvd.LockstepError, ["allreduce.", "shape"], optimizer.step)
    check_still_working(rank, size, "DistributedOptimizer with mismatched models")
    # Small buckets cut differently where the models differ: each gradient is still an
    # allreduce of its own name, so the mismatch is reported, not waited on.
    os.environ["LOCKSTEP_GRADIENT_BUCKET_BYTES"] = "64"
    try:
        model = nn.Sequential(nn.Linear(3, 8 if odd else 3), nn.Linear(8 if odd else 3, 2))
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
        )
    finally:
        del os.environ["LOCKSTEP_GRADIENT_BUCKET_BYTES"]
    model(torch.ones(1, 3)).sum().backward()
    expect_error(hvd.LockstepError, ["allreduce.", "shape"], optimizer.step)
    check_still_working(rank, size, "DistributedOptimizer with mismatched models in small buckets")
    # One member of a batch mismatched: its error, and every member released.
    tensors = [torch.ones(3), torch.ones(4 if odd else 3)]
    names = ["torch.batch.agreed", "torch.batch.mismatched"]
    handle = mpi_ops.batched_allreduce_async_(tensors, names)
    expect_error(hvd.LockstepError, ["torch.batch.mismatched", "shape"], hvd.synchronize, handle)
    agreed = hvd.synchronize(mpi_ops.batched_allreduce_async_([torch.ones(3), torch.ones(3)], names))
    assert_tensor_equal(agreed[1], torch.ones(3), "a batch reusing both names")
    check_still_working(rank, size, "a batch with a mismatched member")


def check_name_in_flight(rank, size):
    """Reusing a name while it is in flight is refused. The first submission provably
    cannot complete before the duplicate: rank 0 submits the others' first name only
    after a gate op, and they submit rank 0's first name only after it too."""
    first, second = ("torch.busy.b", "torch.busy.a") if rank == 0 else ("torch.busy.a", "torch.busy.b")
    first_handle = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name=first)
    expect_error(hvd.LockstepError, [first], hvd.allreduce_async_, torch.ones(2), name=first)
    hvd.barrier()
    second_handle = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name=second)
    for handle, name in [(first_handle, first), (second_handle, second)]:
        assert_tensor_equal(hvd.synchronize(handle), torch.full((2,), float(size)), f"{name} completes")


def check_unsupported_tensors(rank, size):
    for dtype in (torch.complex64, torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn):
        tensor = torch.zeros(size, 2, dtype=dtype)
        for submit in (
            hvd.allreduce,
            hvd.allreduce_,
            hvd.allgather,
            lambda t: hvd.broadcast(t, 0),
            lambda t: hvd.broadcast_(t, 0),
            hvd.alltoall,
            hvd.reducescatter,
        ):
            error = expect_error(TypeError, ["dtype", str(dtype).replace("torch.", "")], submit, tensor)
            for supported in ("uint8", "int64", "float16", "bfloat16", "float32", "bool"):
                assert supported in str(error), f"the dtype error lists {supported}: {error}"
    for value, fragment in [([1.0, 2.0], "list"), (np.ones(2, np.float32), "ndarray"), (1.5, "float")]:
        expect_error(TypeError, ["torch.Tensor", fragment], hvd.allreduce, value)
        expect_error(TypeError, ["torch.Tensor", fragment], hvd.broadcast_, value, 0)
    expect_error(ValueError, ["meta", "gpu", "cpu"], hvd.allreduce, torch.ones(2, device="meta"))
    expect_error(ValueError, ["meta", "gpu"], hvd.allgather_async, torch.ones(2, device="meta"))
    expect_error(ValueError, ["layout", "sparse"], hvd.allreduce, torch.ones(2, 2).to_sparse())
    expect_error(TypeError, ["device"], hvd.join, device="cuda")  # an ordinal, as Horovod takes
    check_still_working(rank, size, "unsupported tensors")


def check_bad_arguments(rank, size):
    good = torch.ones(3)
    expect_error(TypeError, ["name"], hvd.allreduce, good, name=5)
    if size & (size - 1):  # Horovod's error where Adasum cannot run
        expect_error(NotImplementedError, ["adasum", "power-of-2"], hvd.allreduce, good, op=hvd.Adasum)
    else:
        expect_error(
            ValueError, ["adasum", "floating-point"], hvd.allreduce, torch.ones(3, dtype=torch.int32), op=hvd.Adasum
        )
    expect_error(ValueError, ["reduce op"], hvd.allreduce_, good, op=17)
    expect_error(TypeError, ["prescale_factor"], hvd.allreduce, good, prescale_factor="2")
    expect_error(ValueError, ["bool", "average"], hvd.allreduce, torch.ones(3, dtype=torch.bool))
    expect_error(ValueError, ["root_rank", str(size)], hvd.broadcast, good, root_rank=size)
    expect_error(ValueError, ["root_rank"], hvd.broadcast_, good, root_rank=-1)
    expect_error(ValueError, ["splits"], hvd.alltoall, good, splits=[1] * (size + 1))
    expect_error(ValueError, ["splits", "sum"], hvd.alltoall, good, splits=[5] + [0] * (size - 1))
    # Horovod: a splits tensor that is not an integer tensor is a ValueError.
    expect_error(ValueError, ["splits", "integers"], hvd.alltoall, good, splits=torch.ones(size) * 0.5)
    expect_error(ValueError, ["divisible"], hvd.alltoall, torch.ones(size + 1))
    expect_error(ValueError, ["dimension"], hvd.allgather, torch.tensor(1.0))
    expect_error(ValueError, ["reducescatter", "max"], hvd.reducescatter, torch.ones(size, 2), op=hvd.Max)
    expect_error(TypeError, ["list"], hvd.grouped_allreduce, good)
    expect_error(ValueError, ["at least one"], hvd.grouped_allreduce_, [])
    expect_error(TypeError, ["tensors[1]"], hvd.grouped_allreduce_async, [good, [1.0]])
    expect_error(TypeError, ["handle"], hvd.synchronize, "not a handle")
    expect_error(ValueError, ["handle"], hvd.poll, 10**9)
    check_still_working(rank, size, "bad arguments")


def check_optimizer_misuse(rank, size):
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    named = list(model.named_parameters())
    expect_error(
        ValueError,
        ["unique", "0.weight"],
        hvd.DistributedOptimizer,
        sgd,
        named_parameters=[("0.weight", p) for _, p in named],
    )
    expect_error(
        ValueError,
        ["unnamed", "allreduce.noname.0.2", "(2, 4)"],
        hvd.DistributedOptimizer,
        sgd,
        named_parameters=named[:2] + named[3:],
    )
    expect_error(
        ValueError, ["(name, parameter) tuples"], hvd.DistributedOptimizer, sgd, named_parameters=[p for _, p in named]
    )
    expect_error(TypeError, ["named_parameters"], hvd.DistributedOptimizer, sgd, named_parameters=5)
    expect_error(TypeError, ["torch.optim.Optimizer"], hvd.DistributedOptimizer, model)
    expect_error(
        ValueError,
        ["already a DistributedOptimizer"],
        hvd.DistributedOptimizer,
        hvd.DistributedOptimizer(torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)),
    )
    expect_error(
        ValueError,
        ["gradient_predivide_factor", "adasum"],
        hvd.DistributedOptimizer,
        sgd,
        op=hvd.Adasum,
        gradient_predivide_factor=2.0,
    )
    expect_error(ValueError, ["max"], hvd.DistributedOptimizer, sgd, op=hvd.Max)
    expect_error(
        ValueError,
        ["gradient_predivide_factor", "average"],
        hvd.DistributedOptimizer,
        sgd,
        op=hvd.Sum,
        gradient_predivide_factor=2.0,
    )
    expect_error(ValueError, ["backward_passes_per_step"], hvd.DistributedOptimizer, sgd, backward_passes_per_step=0)
    expect_error(TypeError, ["backward_passes_per_step"], hvd.DistributedOptimizer, sgd, backward_passes_per_step=1.5)
    expect_error(ValueError, ["groups"], hvd.DistributedOptimizer, sgd, groups=-1)
    expect_error(
        ValueError, ["groups[0]", "not a trainable parameter"], hvd.DistributedOptimizer, sgd, groups=[[torch.ones(2)]]
    )
    expect_error(
        ValueError, ["more than one group"], hvd.DistributedOptimizer, sgd, groups=[[named[0][1]], [named[0][1]]]
    )
    expect_error(TypeError, ["compression"], hvd.DistributedOptimizer, sgd, compression="fp16")
    expect_error(TypeError, ["sparse_as_dense"], hvd.DistributedOptimizer, sgd, sparse_as_dense=1)
    expect_error(TypeError, ["params"], hvd.broadcast_parameters, 5, root_rank=0)
    expect_error(
        ValueError, ["unique", "w"], hvd.broadcast_parameters, [("w", torch.ones(1)), ("w", torch.ones(1))], root_rank=0
    )
    expect_error(TypeError, ["torch.Tensor"], hvd.broadcast_parameters, {"w": [1.0]}, root_rank=0)
    expect_error(ValueError, ["root_rank"], hvd.broadcast_parameters, model.state_dict(), root_rank=size)
    expect_error(TypeError, ["torch.optim.Optimizer"], hvd.broadcast_optimizer_state, model, root_rank=0)
    check_still_working(rank, size, "optimizer misuse")


def run(rank, size):
    check(check_mismatches_across_ranks, rank, size)
    check(check_name_in_flight, rank, size)
    check(check_unsupported_tensors, rank, size)
    check(check_bad_arguments, rank, size)
    check(check_optimizer_misuse, rank, size)
