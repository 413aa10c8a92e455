"""Horovod parity for lockstep.torch's collectives, checked against Horovod's
documented behaviour: its error types, its scaling arithmetic bit for bit, grouped
allgather/reducescatter with their gradients, sparse allreduce, Adasum, alltoall's
splits forms, join(device) and broadcast while a rank has joined.

run(rank, size) runs each as a named check (scripts/checks.py); LOCKSTEP_CHECKS picks
some (adasum_levels needs 4, 8, ... ranks)."""

import numpy as np
import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from rank_checks import expect_error, horovod_scale
from torch_checks import NUMERIC_DTYPES, NUMPY_DTYPES, assert_tensor_equal, to_numpy

import lockstep.torch as hvd

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def check_error_types(rank, size):
    """A name resubmitted while in flight is a ValueError (Horovod's type) for every
    collective; disagreeing ranks get a RuntimeError (what Horovod's tests catch,
    with torch.FatalError) that is not a ValueError."""
    submits = {
        "allreduce": lambda name: hvd.allreduce_async(torch.ones(2), name=name, op=hvd.Sum),
        "allgather": lambda name: hvd.allgather_async(torch.ones(2), name=name),
        "broadcast": lambda name: hvd.broadcast_async(torch.ones(2), 0, name=name),
        "reducescatter": lambda name: hvd.reducescatter_async(torch.ones(size), name=name, op=hvd.Sum),
        "alltoall": lambda name: hvd.alltoall_async(torch.ones(size), name=name),
    }
    for kind, submit in submits.items():
        # Rank 0 submits the others' first name only after the barrier, and they
        # submit rank 0's only after it too: the first submissions cannot complete
        # before the duplicates.
        first, second = (f"{kind}.b", f"{kind}.a") if rank == 0 else (f"{kind}.a", f"{kind}.b")
        handle = submit(first)
        for catch in (ValueError, (torch.FatalError, ValueError), hvd.InvalidArgumentError, hvd.LockstepError):
            expect_error(catch, [first, "in flight"], submit, first)
        hvd.barrier()
        other = submit(second)
        hvd.synchronize(handle)
        hvd.synchronize(other)
    odd = rank == size - 1
    error = expect_error(
        (torch.FatalError, RuntimeError), ["shape"], hvd.allreduce, torch.ones(3 if odd else 2), name="parity.mismatch"
    )
    assert isinstance(error, hvd.HorovodInternalError) and not isinstance(error, ValueError), type(error).__mro__
    for scalar_op in (
        lambda t: hvd.reducescatter(t),
        lambda t: hvd.grouped_reducescatter([t]),
        lambda t: hvd.allgather(t),
        lambda t: hvd.grouped_allgather([t]),
    ):
        for catch in (ValueError, RuntimeError, hvd.HorovodInternalError):
            expect_error(catch, ["dimension"], scalar_op, torch.tensor(float(rank)))
    for catch in (ValueError, RuntimeError):
        expect_error(catch, ["adasum"], hvd.reducescatter, torch.ones(size), op=hvd.Adasum)


def _inputs(dtype, shape, rank, seed, only_rank0):
    """Values with many significant bits; zeros on other ranks when only_rank0, so the
    sum over ranks is exact and only the scaling arithmetic is under test."""
    generator = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        values = torch.randn(shape, generator=generator, dtype=torch.float64) * 37.0
    else:
        low = 0 if dtype == torch.uint8 else -50
        values = torch.randint(low, 50, shape, generator=generator, dtype=torch.int64).double()
    if only_rank0 and rank != 0:
        values = torch.zeros(shape, dtype=torch.float64)
    return values.to(dtype)


def check_scaling_is_horovods(rank, size):
    """prescale/postscale (and Average's 1/size) as Horovod computes them, compared
    with zero tolerance: floats in their own precision (16-bit through float32),
    integers through float64."""
    factors = [(0.1, 1.0), (1.0, 0.3), (1.0 / 3.0, 7.0), (2.5, 1.0 / 7.0)]
    double_rounding_differs = False
    for dtype in NUMERIC_DTYPES:
        for index, (pre, post) in enumerate(factors):
            for op, op_name in ((hvd.Sum, "Sum"), (hvd.Average, "Average")):
                # Prescale: random values on rank 0 only. Postscale: integer-valued inputs
                # everywhere, whose sum is exact.
                only_rank0 = pre != 1.0
                seed = 100 * index + 7
                mine = _inputs(dtype, (size + 1, 3), rank, seed + rank, only_rank0)
                if not only_rank0:
                    mine = mine.double().round().clamp(-60, 60).to(dtype)
                everyone = [to_numpy(t) for t in hvd.allgather(mine.unsqueeze(0), name=f"in.{dtype}.{index}.{op_name}")]
                np_dtype = NUMPY_DTYPES[dtype]
                scaled = [horovod_scale(x, pre) for x in everyone]
                total = (
                    np.sum(np.stack(scaled).astype(np.float64), axis=0).astype(np_dtype)
                    if dtype.is_floating_point
                    else np.sum(np.stack(scaled), axis=0, dtype=np_dtype)
                )
                post_factor = post / size if op == hvd.Average else post
                expected = horovod_scale(total, post_factor)
                what = f"{dtype} {op_name} prescale {pre} postscale {post}"
                result = hvd.allreduce(mine, op=op, prescale_factor=pre, postscale_factor=post, name=f"scale.{what}")
                assert_tensor_equal(result, expected, f"allreduce {what}")
                shares = hvd.reducescatter(mine, op=op, prescale_factor=pre, postscale_factor=post, name=f"rs.{what}")
                counts = [(size + 1) // size + (1 if r < (size + 1) % size else 0) for r in range(size)]
                start = sum(counts[:rank])
                assert_tensor_equal(shares, expected[start : start + counts[rank]], f"reducescatter {what}")
                if dtype == torch.float32:
                    wide = (np.float64(post_factor) * total.astype(np.float64)).astype(np.float32)
                    double_rounding_differs |= not np.array_equal(wide, expected)
    assert double_rounding_differs, "no input tells float32 scaling from double scaling: the check could not fail"


def check_grouped_allgather(rank, size):
    tensors = [
        torch.full((rank + 1, 2), float(rank)),
        torch.arange(3, dtype=torch.int32) + rank,
        torch.full((rank % 2 + 1,), rank, dtype=torch.int64),
    ]
    gathered = hvd.grouped_allgather(tensors, name="parity.grouped_allgather")
    for index, result in enumerate(gathered):
        expected = torch.cat([_rank_tensors(r)[index] for r in range(size)])
        assert_tensor_equal(result, expected, f"grouped_allgather tensor {index}")
    handle = hvd.grouped_allgather_async(tensors)
    for result, expected in zip(hvd.synchronize(handle), gathered):
        assert_tensor_equal(result, expected, "grouped_allgather_async")
    # Gradient: as allgather's, the average of the gradients, this rank's rows.
    leaves = [torch.full((rank + 1, 2), 1.0, requires_grad=True), torch.ones(2, requires_grad=True)]
    outputs = hvd.grouped_allgather(leaves)
    (sum(out.sum() * (r + 1) for r, out in enumerate(outputs))).backward()
    for index, leaf in enumerate(leaves):
        assert_tensor_equal(leaf.grad, torch.full_like(leaf, float(index + 1)), f"grouped_allgather grad {index}")
    expect_error(ValueError, ["at least one"], hvd.grouped_allgather, [])


def _rank_tensors(r):
    return [
        torch.full((r + 1, 2), float(r)),
        torch.arange(3, dtype=torch.int32) + r,
        torch.full((r % 2 + 1,), r, dtype=torch.int64),
    ]


def check_grouped_reducescatter(rank, size):
    rows = 2 * size + 1
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    for dtype in (torch.int32, torch.int64, torch.float16, torch.float32, torch.float64):
        tensors = [(torch.arange(rows * 2).reshape(rows, 2) % 7 + rank * (k + 1)).to(dtype) for k in range(3)]
        for op, pre, post in (
            (hvd.Sum, 1.0, 1.0),
            (hvd.Average, 1.0, 1.0),
            (hvd.Sum, 0.5, 3.0),
            (hvd.Average, 2.0, 0.25),
        ):
            results = hvd.grouped_reducescatter(tensors, op=op, prescale_factor=pre, postscale_factor=post)
            for k, result in enumerate(results):
                everyone = [
                    to_numpy((torch.arange(rows * 2).reshape(rows, 2) % 7 + r * (k + 1)).to(dtype)) for r in range(size)
                ]
                np_dtype = NUMPY_DTYPES[dtype]
                total = np.sum(np.stack([horovod_scale(x, pre) for x in everyone]), axis=0, dtype=np_dtype)
                expected = horovod_scale(total, post / size if op == hvd.Average else post)
                assert_tensor_equal(
                    result,
                    expected[start : start + counts[rank]],
                    f"grouped_reducescatter {dtype} op {op} pre {pre} post {post} tensor {k}",
                )
    # Gradients as Horovod defines them: ones * size for Sum, ones for Average.
    for op, factor in ((hvd.Sum, size), (hvd.Average, 1)):
        leaves = [torch.ones(rows, 3, requires_grad=True), torch.ones(size * 2, requires_grad=True)]
        for out in hvd.grouped_reducescatter(leaves, op=op):
            out.backward(torch.ones_like(out))
        for leaf in leaves:
            assert_tensor_equal(leaf.grad, torch.full_like(leaf, float(factor)), f"grouped_reducescatter grad {op}")
        leaf = torch.ones(rows, 2, requires_grad=True)
        hvd.reducescatter(leaf, op=op).sum().backward()
        assert_tensor_equal(leaf.grad, torch.full_like(leaf, float(factor)), f"reducescatter grad {op}")
    leaf = torch.ones(rows, 2, requires_grad=True)
    hvd.reducescatter(leaf, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0).sum().backward()
    assert_tensor_equal(leaf.grad, torch.full_like(leaf, 1.5 * size), "reducescatter grad with scale factors")
    expect_error(ValueError, ["at least one"], hvd.grouped_reducescatter, [])
    expect_error(ValueError, ["reducescatter", "max"], hvd.grouped_reducescatter, [torch.ones(size)], op=hvd.Max)


def check_sparse_allreduce(rank, size):
    dense_of = []
    for r in range(size):
        indices = torch.tensor([[r, (r + 2) % 5, 4][: r + 1], [1, 0, 2][: r + 1]])
        values = torch.tensor([1.0 + r, 2.0, -3.0][: r + 1])
        dense_of.append(torch.sparse_coo_tensor(indices, values, (5, 3)))
    mine = dense_of[rank]
    expected_sum = sum(t.to_dense() for t in dense_of)
    for op, expected in ((hvd.Sum, expected_sum), (hvd.Average, expected_sum / size)):
        handle = hvd.sparse_allreduce_async(mine, name=f"parity.sparse.{op}", op=op)
        result = handle() if op == hvd.Sum else hvd.synchronize(handle)
        assert result.is_sparse, "sparse_allreduce_async returns a sparse tensor"
        assert result._nnz() == sum(t._nnz() for t in dense_of), "every rank's entries, uncoalesced"
        assert_tensor_equal(result.to_dense(), expected, f"sparse allreduce op {op}")
    handle = hvd.sparse_allreduce_async(mine, name="parity.sparse.poll", op=hvd.Sum)
    while not hvd.poll(handle):
        pass
    assert_tensor_equal(hvd.synchronize(handle).to_dense(), expected_sum, "sparse allreduce after poll")
    expect_error(ValueError, ["sparse"], hvd.sparse_allreduce_async, torch.ones(2), "x", hvd.Sum)


def adasum_reference(vectors):
    """Adasum of two vectors per Horovod's definition, in float64."""
    a, b = (np.asarray(v, np.float64) for v in vectors)
    dot, a_sq, b_sq = float(a @ b), float(a @ a), float(b @ b)
    tiny = np.sqrt(np.finfo(np.float64).tiny)
    ca = 1.0 - dot / a_sq * 0.5 if a_sq >= tiny else 1.0
    cb = 1.0 - dot / b_sq * 0.5 if b_sq >= tiny else 1.0
    return ca * a + cb * b


def check_adasum_allreduce(rank, size):
    if size & (size - 1):
        expect_error(NotImplementedError, ["adasum", "power-of-2"], hvd.allreduce, torch.ones(3), op=hvd.Adasum)
        expect_error(NotImplementedError, ["adasum"], hvd.grouped_allreduce, [torch.ones(3)], op=hvd.Adasum)
        return

    def compare(result, expected, what):
        # Exact at 2 ranks, where small integers keep every dot product exact; beyond,
        # later levels combine non-integers, whose sums depend on the order.
        if size == 2:
            assert_tensor_equal(result, expected, what)
        else:
            assert np.allclose(to_numpy(result).astype(np.float64), expected.astype(np.float64), rtol=1e-6), what

    for dtype in (torch.float32, torch.float64):
        for shape in [(7,), (4, 3), (1,), (0,)]:
            count = int(np.prod(shape))
            mine = (torch.arange(count, dtype=torch.float64) % 5 - 2 + rank * (torch.arange(count) % 3)).reshape(shape)
            everyone = [
                (torch.arange(count, dtype=torch.float64) % 5 - 2 + r * (torch.arange(count) % 3)).reshape(-1)
                for r in range(size)
            ]
            expected = adasum_tree_reference(everyone, NUMPY_DTYPES[dtype]).reshape(shape)
            compare(
                hvd.allreduce(mine.to(dtype), op=hvd.Adasum, name=f"adasum.{dtype}.{shape}"),
                expected,
                f"Adasum {dtype} {shape}",
            )
    # Orthogonal gradients add, identical ones stay (the defining properties), exactly.
    basis = torch.zeros(size)
    basis[rank] = 1.0 + rank
    assert_tensor_equal(hvd.allreduce(basis, op=hvd.Adasum), torch.arange(1.0, size + 1), "orthogonal")
    same = torch.tensor([3.0, -1.0, 0.5])
    assert_tensor_equal(hvd.allreduce(same, op=hvd.Adasum), same, "identical")
    # A group: each tensor gets its own coefficients; scale factors apply around it.
    group = [same * (rank + 1), basis]
    reduced = hvd.grouped_allreduce(group, op=hvd.Adasum, prescale_factor=2.0, postscale_factor=0.5)
    first = adasum_tree_reference([2.0 * same.double() * (r + 1) for r in range(size)], np.float32) * np.float32(0.5)
    compare(reduced[0], first, "grouped Adasum tensor 0")
    assert_tensor_equal(reduced[1], torch.arange(1.0, size + 1), "grouped Adasum tensor 1")
    half = hvd.allreduce(torch.tensor([1.0, 2.0], dtype=torch.float16) * (rank + 1), op=hvd.Adasum)
    compare(
        half, adasum_tree_reference([np.array([1.0, 2.0]) * (r + 1) for r in range(size)], np.float16), "Adasum float16"
    )
    expect_error(
        ValueError, ["adasum", "floating-point"], hvd.allreduce, torch.ones(2, dtype=torch.int32), op=hvd.Adasum
    )


def adasum_tree_reference(vectors, dtype):
    """Adasum over a power-of-2 number of ranks: pairs at distance 1 combine, then
    the results at distance 2, and so on, rounding to `dtype` after each level as the
    exchanged slices do."""
    level = [np.asarray(v, np.float64) for v in vectors]
    while len(level) > 1:
        level = [adasum_reference(level[i : i + 2]).astype(dtype).astype(np.float64) for i in range(0, len(level), 2)]
    return level[0].astype(dtype)


def check_adasum_levels(rank, size):
    """At 4+ ranks every level of the halving runs, with its own group for the dot
    products. Level-1 partners hold orthogonal vectors here, so every intermediate is
    exact and the comparison can be exact; random data is compared closely."""
    assert size >= 4 and not size & (size - 1), "run this check on 4, 8, ... ranks"
    count = 13
    index = torch.arange(count)
    mine = torch.where(index % 2 == rank % 2, (index % 7 - 3 + rank).double(), torch.zeros(count, dtype=torch.float64))
    everyone = [
        np.where(np.arange(count) % 2 == r % 2, np.arange(count) % 7 - 3 + r, 0).astype(np.float64) for r in range(size)
    ]
    for dtype in (torch.float32, torch.float64):
        expected = adasum_tree_reference(everyone, NUMPY_DTYPES[dtype])
        assert_tensor_equal(hvd.allreduce(mine.to(dtype), op=hvd.Adasum), expected, f"Adasum levels {dtype}")
    generator = torch.Generator().manual_seed(rank)
    noisy = [
        torch.randn(1000, generator=generator, dtype=torch.float64),
        torch.randn(3, 7, generator=generator, dtype=torch.float64),
    ]
    reduced = hvd.grouped_allreduce(noisy, op=hvd.Adasum)
    for index, result in enumerate(reduced):
        everyone = [to_numpy(t).reshape(-1) for t in hvd.allgather(noisy[index].reshape(1, -1))]
        expected = adasum_tree_reference(everyone, np.float64).reshape(result.shape)
        assert np.allclose(to_numpy(result), expected, rtol=1e-12, atol=1e-12), f"Adasum levels, tensor {index}"


def check_alltoall_splits_forms(rank, size):
    rows = sum(range(1, size + 1))
    tensor = torch.arange(rows, dtype=torch.float32) + 100 * rank
    for label, splits in (
        ("list", list(range(1, size + 1))),
        ("int32 tensor", torch.arange(1, size + 1, dtype=torch.int32)),
        ("int64 tensor", torch.arange(1, size + 1)),
    ):
        received, received_splits = hvd.alltoall(tensor, splits=splits, name=f"parity.alltoall.{label}")
        assert received_splits.dtype == torch.int32, f"{label}: received splits are int32, as in Horovod"
        assert_tensor_equal(received_splits, torch.full((size,), rank + 1, dtype=torch.int32), f"{label} splits")
        start = sum(range(1, rank + 1))
        expected = torch.cat(
            [torch.arange(start, start + rank + 1, dtype=torch.float32) + 100 * r for r in range(size)]
        )
        assert_tensor_equal(received, expected, f"alltoall with splits as {label}")
    even = hvd.alltoall(torch.arange(size * 2, dtype=torch.float32))
    assert isinstance(even, torch.Tensor), "without splits, alltoall returns only the tensor"


def check_join_device_and_broadcast_while_joined(rank, size):
    # A device ordinal is accepted as Horovod accepts it; without GPU collectives the
    # join runs on the CPU.
    last = hvd.join(0)
    assert 0 <= last < size, f"join(0) returned {last}"
    expect_error(ValueError, ["device"], hvd.join, -2)
    # Rank 0 joins while the others broadcast: they get an error, not a hang.
    if rank == 0:
        last = hvd.join()
        assert size == 1 or last != 0, f"rank 0 joined first, but join says rank {last} joined last"
    else:
        for index, catch in enumerate((RuntimeError, (torch.FatalError, RuntimeError))):
            expect_error(catch, ["joined"], hvd.broadcast, torch.ones(2), 1, f"parity.joined.{index}")
        hvd.join()
    result = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="parity.after.join")
    assert_tensor_equal(result, torch.full((2,), float(size)), "allreduce after join")


def run(rank, size):
    check(check_error_types, rank, size)
    check("scaling", check_scaling_is_horovods, rank, size)
    check(check_grouped_allgather, rank, size)
    check(check_grouped_reducescatter, rank, size)
    check(check_sparse_allreduce, rank, size)
    check(check_adasum_levels, rank, size)  # 4, 8, ... ranks; before adasum_allreduce, as the 4-rank job ran them
    check(check_adasum_allreduce, rank, size)
    check("alltoall_splits", check_alltoall_splits_forms, rank, size)
    check("join", check_join_device_and_broadcast_while_joined, rank, size)
