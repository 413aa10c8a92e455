"""lockstep.torch collectives: every op x every CPU dtype, out-of-place and in-place,
sync and async, with exact expected values; non-contiguous inputs, compression,
poll, barrier and object collectives."""

import warnings

import numpy as np
import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from rank_checks import alltoall_rows, average_values, expected_reduction, product_values, rank_values, rows_for
from torch_checks import ALL_DTYPES, NUMERIC_DTYPES, NUMPY_DTYPES, assert_tensor_equal, to_torch

import lockstep.torch as hvd

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}
SHAPES = [(17,), (3, 4), (), (0,), (2, 0, 3)]


def reduction_case(dtype, shape, op_name, rank, size):
    """(this rank's input tensor, expected result) for one allreduce."""
    np_dtype = NUMPY_DTYPES[dtype]
    if op_name == "Product":
        inputs = [product_values(np_dtype, shape, r) for r in range(size)]
    elif op_name == "Average":
        inputs = [average_values(np_dtype, shape, r, size) for r in range(size)]
    else:
        inputs = [rank_values(np_dtype, shape, r) for r in range(size)]
    return to_torch(inputs[rank]), expected_reduction(inputs, np_dtype, op_name, size)


def ops_for(dtype):
    return ["Sum", "Min", "Max", "Product"] if dtype == torch.bool else list(OPS)


def check_allreduce_forms(rank, size):
    """Async out-of-place and in-place forms in flight together, then checked."""
    pending = []
    for dtype in ALL_DTYPES:
        for op_name in ops_for(dtype):
            for shape in SHAPES:
                tensor, expected = reduction_case(dtype, shape, op_name, rank, size)
                original = tensor.clone()
                handle = hvd.allreduce_async(tensor, op=OPS[op_name])
                what = f"{dtype} {op_name} {shape}"
                pending.append((handle, expected, tensor, original, False, f"allreduce_async {what}"))
                target = tensor.clone()
                handle = hvd.allreduce_async_(target, op=OPS[op_name])
                pending.append((handle, expected, target, None, True, f"allreduce_async_ {what}"))
    for handle, expected, tensor, original, in_place, what in pending:
        result = hvd.synchronize(handle)
        assert_tensor_equal(result, expected, what)
        if in_place:
            assert result is tensor, f"{what}: synchronize must return the tensor reduced in place"
        else:
            assert result is not tensor, f"{what}: the result must be a new tensor"
            assert_tensor_equal(tensor, original, f"{what}: input untouched")


def check_allreduce_sync_and_scaling(rank, size):
    for dtype in ALL_DTYPES:
        for op_name in ops_for(dtype):
            tensor, expected = reduction_case(dtype, (2, 5), op_name, rank, size)
            assert_tensor_equal(hvd.allreduce(tensor, op=OPS[op_name]), expected, f"allreduce {dtype} {op_name}")
            in_place = hvd.allreduce_(tensor, op=OPS[op_name], name=f"inplace.{dtype}.{op_name}")
            assert in_place is tensor, "allreduce_ returns its argument"
            assert_tensor_equal(tensor, expected, f"allreduce_ {dtype} {op_name}")
    for dtype in NUMERIC_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        inputs = [rank_values(np_dtype, (7,), r) for r in range(size)]
        expected = expected_reduction(inputs, np_dtype, "Sum", size, prescale=2.0, postscale=0.5)
        result = hvd.allreduce(to_torch(inputs[rank]), op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
        assert_tensor_equal(result, expected, f"allreduce {dtype} with prescale 2 and postscale 0.5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        legacy = hvd.allreduce(torch.full((3,), float(rank)), average=False)
    assert_tensor_equal(legacy, torch.full((3,), float(sum(range(size)))), "deprecated average=False sums")


def check_grouped_allreduce(rank, size):
    dtypes = [torch.float32, torch.int64, torch.bfloat16, torch.uint8]
    cases = [reduction_case(dtype, (3, 2), "Sum", rank, size) for dtype in dtypes]
    tensors = [tensor for tensor, _ in cases]
    originals = [tensor.clone() for tensor in tensors]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="group.sync")
    handle = hvd.grouped_allreduce_async(tensors, op=hvd.Sum)
    async_results = hvd.synchronize(handle)
    for index, (_, expected) in enumerate(cases):
        assert_tensor_equal(results[index], expected, f"grouped_allreduce member {index}")
        assert_tensor_equal(async_results[index], expected, f"grouped_allreduce_async member {index}")
        assert_tensor_equal(tensors[index], originals[index], f"grouped_allreduce input {index} untouched")
    in_place = hvd.grouped_allreduce_(tensors, op=hvd.Sum)
    for index, (_, expected) in enumerate(cases):
        assert in_place[index] is tensors[index], "grouped_allreduce_ returns its arguments"
        assert_tensor_equal(tensors[index], expected, f"grouped_allreduce_ member {index}")
    targets = [tensor.clone() for tensor in originals]
    hvd.synchronize(hvd.grouped_allreduce_async_(targets, op=hvd.Sum, name="group.async_"))
    for index, (_, expected) in enumerate(cases):
        assert_tensor_equal(targets[index], expected, f"grouped_allreduce_async_ member {index}")


def check_allgather(rank, size):
    handles = []
    for dtype in ALL_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        for tail in [(), (3,), (2, 2)]:
            rows = [(r + 1) if tail != (2, 2) else r for r in range(size)]  # rank 0 sends no rows once
            parts = [rank_values(np_dtype, (rows[r],) + tail, r) for r in range(size)]
            expected = np.concatenate(parts)
            tensor = to_torch(parts[rank])
            assert_tensor_equal(hvd.allgather(tensor), expected, f"allgather {dtype} rows {rows} tail {tail}")
            handles.append((hvd.allgather_async(tensor, name=f"gather.{dtype}.{tail}"), expected, dtype, tail))
    for handle, expected, dtype, tail in handles:
        assert_tensor_equal(hvd.synchronize(handle), expected, f"allgather_async {dtype} tail {tail}")


def check_broadcast(rank, size):
    for dtype in ALL_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        for root in range(size):
            values = [rank_values(np_dtype, (2, 3), r, offset=root) for r in range(size)]
            expected = values[root]
            tensor = to_torch(values[rank])
            original = tensor.clone()
            assert_tensor_equal(hvd.broadcast(tensor, root), expected, f"broadcast {dtype} from {root}")
            assert_tensor_equal(tensor, original, f"broadcast {dtype} leaves its input untouched")
            handle = hvd.broadcast_async(tensor, root_rank=root)
            assert_tensor_equal(hvd.synchronize(handle), expected, f"broadcast_async {dtype} from {root}")
            assert hvd.broadcast_(tensor, root) is tensor, "broadcast_ returns its argument"
            assert_tensor_equal(tensor, expected, f"broadcast_ {dtype} from {root}")
            other = to_torch(values[rank])
            assert hvd.synchronize(hvd.broadcast_async_(other, root)) is other
            assert_tensor_equal(other, expected, f"broadcast_async_ {dtype} from {root}")
    scalar = hvd.broadcast(torch.tensor(float(rank + 7)), 0, name="broadcast.scalar")
    assert_tensor_equal(scalar, torch.tensor(7.0), "0-d broadcast")


def check_alltoall(rank, size):
    for dtype in ALL_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        # Rank r sends (r + j) % 3 rows to rank j; each row holds its sender and destination.
        splits_of = [[(r + j) % 3 for j in range(size)] for r in range(size)]
        sent = [alltoall_rows(np_dtype, r, splits_of[r]) for r in range(size)]
        expected = np.concatenate([rows_for(sent[r], splits_of[r], rank) for r in range(size)])
        expected_splits = torch.tensor([splits_of[r][rank] for r in range(size)], dtype=torch.int32)
        tensor = to_torch(sent[rank])
        for splits in (splits_of[rank], torch.tensor(splits_of[rank], dtype=torch.int32)):
            received, received_splits = hvd.alltoall(tensor, splits=splits)
            assert_tensor_equal(received, expected, f"alltoall {dtype} splits {type(splits).__name__}")
            assert_tensor_equal(received_splits, expected_splits, f"alltoall {dtype} received splits")
        received, received_splits = hvd.synchronize(hvd.alltoall_async(tensor, splits=splits_of[rank]))
        assert_tensor_equal(received, expected, f"alltoall_async {dtype}")
        assert_tensor_equal(received_splits, expected_splits, f"alltoall_async {dtype} received splits")
        even = to_torch(rank_values(np_dtype, (2 * size, 2), rank))
        expected_even = np.concatenate(
            [rank_values(np_dtype, (2 * size, 2), r)[2 * rank : 2 * rank + 2] for r in range(size)]
        )
        assert_tensor_equal(hvd.alltoall(even), expected_even, f"alltoall {dtype} without splits")


def check_reducescatter(rank, size):
    rows = 2 * size + 1  # uneven: the first rank gets one extra row
    base, extra = divmod(rows, size)
    counts = [base + (1 if r < extra else 0) for r in range(size)]
    start = sum(counts[:rank])
    for dtype in NUMERIC_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        for op_name in ("Sum", "Average"):
            make = average_values if op_name == "Average" else None
            inputs = [
                make(np_dtype, (rows, 3), r, size) if make else rank_values(np_dtype, (rows, 3), r) for r in range(size)
            ]
            full = expected_reduction(inputs, np_dtype, op_name, size)
            result = hvd.reducescatter(to_torch(inputs[rank]), op=OPS[op_name])
            assert_tensor_equal(result, full[start : start + counts[rank]], f"reducescatter {dtype} {op_name}")
            handle = hvd.reducescatter_async(to_torch(inputs[rank]), op=OPS[op_name])
            assert_tensor_equal(
                hvd.synchronize(handle), full[start : start + counts[rank]], f"reducescatter_async {dtype} {op_name}"
            )
        inputs = [rank_values(np_dtype, (rows,), r) for r in range(size)]
        full = expected_reduction(inputs, np_dtype, "Sum", size, prescale=2.0)
        scaled = hvd.reducescatter(to_torch(inputs[rank]), op=hvd.Sum, prescale_factor=2.0)
        assert_tensor_equal(scaled, full[start : start + counts[rank]], f"reducescatter {dtype} prescale 2")


def check_non_contiguous(rank, size):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) + rank
    expected_sum = sum(torch.arange(24, dtype=torch.float32).reshape(4, 6) + r for r in range(size))
    for label, make in [
        ("strided", lambda t: t[:, ::2]),
        ("transposed", lambda t: t.t()),
        ("column slice", lambda t: t[:, 1:4]),
    ]:
        view = make(base)
        assert not view.is_contiguous(), label
        assert_tensor_equal(hvd.allreduce(view, op=hvd.Sum), make(expected_sum), f"allreduce of a {label} view")
        target = base.clone()
        target_view = make(target)
        hvd.allreduce_(target_view, op=hvd.Sum)
        expected_target = base.clone()
        make(expected_target).copy_(make(expected_sum))
        assert_tensor_equal(target, expected_target, f"allreduce_ writes through a {label} view")
        assert_tensor_equal(
            hvd.allgather(view), torch.cat([make(base - rank + r) for r in range(size)]), f"allgather of a {label} view"
        )
    root_view = (torch.zeros(4, 6) + rank)[:, 1::2]
    hvd.broadcast_(root_view, root_rank=size - 1)
    assert_tensor_equal(root_view, torch.full((4, 3), float(size - 1)), "broadcast_ into a strided view")


def check_compression(rank, size):
    tensor = torch.arange(6, dtype=torch.float32) + rank
    expected = sum(torch.arange(6, dtype=torch.float32) + r for r in range(size))
    for label, compression in [
        ("fp16", hvd.Compression.fp16),
        ("bf16", hvd.Compression.bf16),
        ("none", hvd.Compression.none),
    ]:
        result = hvd.allreduce(tensor, op=hvd.Sum, compression=compression)
        assert_tensor_equal(result, expected, f"allreduce with Compression.{label} keeps float32")
    grouped = hvd.grouped_allreduce([tensor, tensor.double()], op=hvd.Sum, compression=hvd.Compression.fp16)
    assert_tensor_equal(grouped[1], expected.double(), "grouped_allreduce with fp16 compression restores float64")
    integers = torch.arange(3) + rank
    result = hvd.allreduce(integers, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert_tensor_equal(result, sum(torch.arange(3) + r for r in range(size)), "fp16 compression skips ints")


def check_poll_barrier_objects(rank, size):
    handle = hvd.allreduce_async(torch.ones(1000), op=hvd.Sum, name="polled")
    while not hvd.poll(handle):
        pass
    assert_tensor_equal(hvd.synchronize(handle), torch.full((1000,), float(size)), "polled allreduce")
    hvd.barrier()
    config = {"rank": rank, "tensor": torch.arange(3) * rank, "nested": [rank, (rank, "x")]}
    received = hvd.broadcast_object(config, root_rank=size - 1)
    assert received["rank"] == size - 1 and received["nested"] == [size - 1, (size - 1, "x")], received
    assert torch.equal(received["tensor"], torch.arange(3) * (size - 1)), received
    gathered = hvd.allgather_object({"rank": rank, "payload": "x" * rank})
    assert gathered == [{"rank": r, "payload": "x" * r} for r in range(size)], gathered


def run(rank, size):
    assert (rank, size) == (hvd.local_rank(), hvd.local_size()), "one host: local == global"
    check(check_allreduce_forms, rank, size)
    check(check_allreduce_sync_and_scaling, rank, size)
    check(check_grouped_allreduce, rank, size)
    check(check_allgather, rank, size)
    check(check_broadcast, rank, size)
    check(check_alltoall, rank, size)
    check(check_reducescatter, rank, size)
    check(check_non_contiguous, rank, size)
    check(check_compression, rank, size)
    check(check_poll_barrier_objects, rank, size)
