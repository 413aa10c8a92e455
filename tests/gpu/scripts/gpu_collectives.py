"""lockstep.torch on CUDA tensors: every op x every dtype x every reduce op against the
exact reference values of the CPU suite (rank_checks: Horovod's arithmetic), sync and
async, in place and out of place, fused and alone, plus grouped ops, uneven gathers
and scatters, scaling, compression, autograd, mixed CPU and CUDA tensors in one step,
barrier and join. Run at 1, 2 and 3 ranks, and with LOCKSTEP_GPU_OPERATIONS=mpi."""

import os

import numpy as np
import torch
from gpu_checks import assert_gpu_result, on_gpu, start
from rank_checks import (
    alltoall_rows,
    average_values,
    expected_reduction,
    product_values,
    rank_values,
    rows_for,
    run_main,
)
from torch_checks import ALL_DTYPES, NUMERIC_DTYPES, NUMPY_DTYPES, assert_tensor_equal

import lockstep.torch as hvd

OPS = {"Sum": hvd.Sum, "Average": hvd.Average, "Min": hvd.Min, "Max": hvd.Max, "Product": hvd.Product}
SHAPES = [(17,), (3, 4), (), (0,), (2, 0, 3)]


def ops_for(dtype):
    return ["Sum", "Min", "Max", "Product"] if dtype == torch.bool else list(OPS)


def reduction_inputs(np_dtype, shape, op_name, size):
    if op_name == "Product":
        return [product_values(np_dtype, shape, r) for r in range(size)]
    if op_name == "Average":
        return [average_values(np_dtype, shape, r, size) for r in range(size)]
    return [rank_values(np_dtype, shape, r) for r in range(size)]


def check_allreduce_every_dtype_and_op(rank, size, device):
    """All in flight at once (so the core fuses them), then checked."""
    pending = []
    for dtype in ALL_DTYPES:
        for op_name in ops_for(dtype):
            for shape in SHAPES:
                inputs = reduction_inputs(NUMPY_DTYPES[dtype], shape, op_name, size)
                expected = expected_reduction(inputs, NUMPY_DTYPES[dtype], op_name, size)
                tensor = on_gpu(inputs[rank])
                original = tensor.clone()
                what = f"{dtype} {op_name} {shape}"
                pending.append(
                    (
                        hvd.allreduce_async(tensor, op=OPS[op_name]),
                        expected,
                        tensor,
                        original,
                        f"allreduce_async {what}",
                    )
                )
                target = tensor.clone()
                pending.append(
                    (hvd.allreduce_async_(target, op=OPS[op_name]), expected, target, None, f"allreduce_async_ {what}")
                )
    for handle, expected, tensor, original, what in pending:
        result = hvd.synchronize(handle)
        assert_gpu_result(result, expected, what, device)
        if original is None:
            assert result is tensor, f"{what}: synchronize must return the tensor reduced in place"
        else:
            assert_gpu_result(tensor, original, f"{what}: input untouched")


def check_allreduce_sync_and_scaling(rank, size, device):
    for dtype in ALL_DTYPES:
        for op_name in ops_for(dtype):
            inputs = reduction_inputs(NUMPY_DTYPES[dtype], (2, 5), op_name, size)
            expected = expected_reduction(inputs, NUMPY_DTYPES[dtype], op_name, size)
            tensor = on_gpu(inputs[rank])
            assert_gpu_result(hvd.allreduce(tensor, op=OPS[op_name]), expected, f"allreduce {dtype} {op_name}")
            assert hvd.allreduce_(tensor, op=OPS[op_name], name=f"inplace.{dtype}.{op_name}") is tensor
            assert_gpu_result(tensor, expected, f"allreduce_ {dtype} {op_name}")
    for dtype in NUMERIC_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        inputs = [rank_values(np_dtype, (7,), r) for r in range(size)]
        for prescale, postscale in [(2.0, 0.5), (0.5, 3.0), (1.0, 0.25)]:
            for op_name in ("Sum", "Average"):
                if op_name == "Average":
                    inputs_here = [average_values(np_dtype, (7,), r, size) for r in range(size)]
                else:
                    inputs_here = inputs
                expected = expected_reduction(
                    inputs_here, np_dtype, op_name, size, prescale=prescale, postscale=postscale
                )
                result = hvd.allreduce(
                    on_gpu(inputs_here[rank]), op=OPS[op_name], prescale_factor=prescale, postscale_factor=postscale
                )
                assert_gpu_result(result, expected, f"allreduce {dtype} {op_name} pre {prescale} post {postscale}")


def check_grouped_allreduce(rank, size):
    dtypes = [torch.float32, torch.int64, torch.bfloat16, torch.float16, torch.uint8, torch.float64]
    cases = []
    for dtype in dtypes:
        inputs = [rank_values(NUMPY_DTYPES[dtype], (3, 2), r) for r in range(size)]
        cases.append((on_gpu(inputs[rank]), expected_reduction(inputs, NUMPY_DTYPES[dtype], "Sum", size)))
    tensors = [tensor for tensor, _ in cases]
    originals = [tensor.clone() for tensor in tensors]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="gpu.group.sync")
    async_results = hvd.synchronize(hvd.grouped_allreduce_async(tensors, op=hvd.Sum))
    for index, (_, expected) in enumerate(cases):
        assert_gpu_result(results[index], expected, f"grouped_allreduce member {index}")
        assert_gpu_result(async_results[index], expected, f"grouped_allreduce_async member {index}")
        assert_gpu_result(tensors[index], originals[index], f"grouped_allreduce input {index} untouched")
    in_place = hvd.grouped_allreduce_(tensors, op=hvd.Sum)
    assert all(result is tensor for result, tensor in zip(in_place, tensors)), "grouped_allreduce_ returns its inputs"
    for index, (_, expected) in enumerate(cases):
        assert_gpu_result(tensors[index], expected, f"grouped_allreduce_ member {index}")


def check_many_small_and_large(rank, size, device):
    """A few hundred small tensors in flight (one fused response), then tensors past
    the fusion threshold, which go to NCCL without a copy."""
    sizes = [1 + (index * 37) % 1000 for index in range(300)]
    tensors = [torch.full((n,), float(rank + 1), device=device) for n in sizes]
    handles = [hvd.allreduce_async_(t, name=f"gpu.small.{i}", op=hvd.Sum) for i, t in enumerate(tensors)]
    total = float(size * (size + 1) // 2)
    for index, handle in enumerate(handles):
        assert_gpu_result(hvd.synchronize(handle), torch.full((sizes[index],), total), f"small tensor {index}")
    for elements in (1 << 22, 40 << 20):  # 16 MiB, 160 MiB of float32
        big = torch.full((elements,), float(rank + 1), device=device)
        hvd.allreduce_(big, name=f"gpu.big.{elements}", op=hvd.Sum)
        wrong = int((big != total).sum())
        assert wrong == 0, f"{elements}-element allreduce: {wrong} wrong values"
        averaged = hvd.allreduce(big, name=f"gpu.big.avg.{elements}", op=hvd.Average)
        # Horovod's Average: the sum, times 1/size rounded to float32.
        wrong = int((averaged != torch.tensor(total * size, device=device) * (1.0 / size)).sum())
        assert wrong == 0, f"{elements}-element average: {wrong} wrong values"


def check_allgather(rank, size, device):
    handles = []
    for dtype in ALL_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        for tail in [(), (3,), (2, 2)]:
            rows = [(r + 1) if tail != (2, 2) else r for r in range(size)]  # rank 0 sends no rows once
            parts = [rank_values(np_dtype, (rows[r],) + tail, r) for r in range(size)]
            expected = np.concatenate(parts)
            tensor = on_gpu(parts[rank])
            assert_gpu_result(hvd.allgather(tensor), expected, f"allgather {dtype} rows {rows} tail {tail}", device)
            handles.append((hvd.allgather_async(tensor, name=f"gpu.gather.{dtype}.{tail}"), expected, dtype, tail))
    for handle, expected, dtype, tail in handles:
        assert_gpu_result(hvd.synchronize(handle), expected, f"allgather_async {dtype} tail {tail}")
    parts = [[rank_values(NUMPY_DTYPES[d], (r + 1, 2), r) for r in range(size)] for d in (torch.float32, torch.int32)]
    gathered = hvd.grouped_allgather([on_gpu(p[rank]) for p in parts])
    for index, part in enumerate(parts):
        assert_gpu_result(gathered[index], np.concatenate(part), f"grouped_allgather member {index}")


def check_broadcast(rank, size):
    for dtype in ALL_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        for root in range(size):
            values = [rank_values(np_dtype, (2, 3), r, offset=root) for r in range(size)]
            tensor = on_gpu(values[rank])
            original = tensor.clone()
            assert_gpu_result(hvd.broadcast(tensor, root), values[root], f"broadcast {dtype} from {root}")
            assert_gpu_result(tensor, original, f"broadcast {dtype} leaves its input untouched")
            assert hvd.broadcast_(tensor, root) is tensor
            assert_gpu_result(tensor, values[root], f"broadcast_ {dtype} from {root}")
            other = on_gpu(values[rank])
            assert hvd.synchronize(hvd.broadcast_async_(other, root)) is other
            assert_gpu_result(other, values[root], f"broadcast_async_ {dtype} from {root}")


def check_alltoall(rank, size):
    for dtype in ALL_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        # Rank r sends (r + j) % 3 rows to rank j; each row holds its sender and destination.
        splits_of = [[(r + j) % 3 for j in range(size)] for r in range(size)]
        sent = [alltoall_rows(np_dtype, r, splits_of[r]) for r in range(size)]
        expected = np.concatenate([rows_for(sent[r], splits_of[r], rank) for r in range(size)])
        expected_splits = torch.tensor([splits_of[r][rank] for r in range(size)], dtype=torch.int32)
        tensor = on_gpu(sent[rank])
        received, received_splits = hvd.alltoall(tensor, splits=splits_of[rank])
        assert_gpu_result(received, expected, f"alltoall {dtype}")
        assert_tensor_equal(received_splits, expected_splits, f"alltoall {dtype} received splits")
        received, received_splits = hvd.synchronize(hvd.alltoall_async(tensor, splits=splits_of[rank]))
        assert_gpu_result(received, expected, f"alltoall_async {dtype}")
        even = on_gpu(rank_values(np_dtype, (2 * size, 2), rank))
        expected_even = np.concatenate(
            [rank_values(np_dtype, (2 * size, 2), r)[2 * rank : 2 * rank + 2] for r in range(size)]
        )
        assert_gpu_result(hvd.alltoall(even), expected_even, f"alltoall {dtype} without splits")


def check_reducescatter(rank, size):
    rows = 2 * size + 1  # uneven: the first rank gets one extra row
    base, extra = divmod(rows, size)
    counts = [base + (1 if r < extra else 0) for r in range(size)]
    start = sum(counts[:rank])
    for dtype in NUMERIC_DTYPES:
        np_dtype = NUMPY_DTYPES[dtype]
        for op_name in ("Sum", "Average"):
            inputs = reduction_inputs(np_dtype, (rows, 3), op_name, size)
            mine = expected_reduction(inputs, np_dtype, op_name, size)[start : start + counts[rank]]
            assert_gpu_result(
                hvd.reducescatter(on_gpu(inputs[rank]), op=OPS[op_name]), mine, f"reducescatter {dtype} {op_name}"
            )
            handle = hvd.reducescatter_async(on_gpu(inputs[rank]), op=OPS[op_name])
            assert_gpu_result(hvd.synchronize(handle), mine, f"reducescatter_async {dtype} {op_name}")
        inputs = [rank_values(np_dtype, (rows,), r) for r in range(size)]
        mine = expected_reduction(inputs, np_dtype, "Sum", size, prescale=2.0)[start : start + counts[rank]]
        assert_gpu_result(
            hvd.reducescatter(on_gpu(inputs[rank]), op=hvd.Sum, prescale_factor=2.0),
            mine,
            f"reducescatter {dtype} prescale 2",
        )
    inputs = [rank_values(np.dtype(np.float32), (rows, 2), r) for r in range(size)]
    full = expected_reduction(inputs, np.dtype(np.float32), "Sum", size)
    shares = hvd.grouped_reducescatter([on_gpu(inputs[rank]), on_gpu(inputs[rank] * 2)], op=hvd.Sum)
    assert_gpu_result(shares[0], full[start : start + counts[rank]], "grouped_reducescatter member 0")
    assert_gpu_result(shares[1], full[start : start + counts[rank]] * 2, "grouped_reducescatter member 1")


def check_mixed_cpu_and_cuda(rank, size, device):
    """CPU and CUDA tensors in flight together, as one training step may have them."""
    total = float(sum(range(1, size + 1)))
    handles = []
    for index in range(8):
        where = device if index % 2 else torch.device("cpu")
        tensor = torch.full((100 + index,), float(rank + 1), device=where)
        handles.append((hvd.allreduce_async_(tensor, name=f"gpu.mixed.{index}", op=hvd.Sum), where, index))
    for handle, where, index in handles:
        result = hvd.synchronize(handle)
        assert result.device.type == where.type, f"mixed {index}: result on {result.device}, expected {where}"
        assert_tensor_equal(result.cpu(), torch.full((100 + index,), total), f"mixed step tensor {index}")


def check_non_contiguous(rank, size, device):
    base = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6) + rank
    expected_sum = sum(torch.arange(24, dtype=torch.float32).reshape(4, 6) + r for r in range(size))
    for label, make in [("strided", lambda t: t[:, ::2]), ("transposed", lambda t: t.t())]:
        view = make(base)
        assert not view.is_contiguous(), label
        assert_gpu_result(hvd.allreduce(view, op=hvd.Sum), make(expected_sum), f"allreduce of a {label} view")
        target = base.clone()
        hvd.allreduce_(make(target), op=hvd.Sum)
        expected_target = base.cpu().clone()
        make(expected_target).copy_(make(expected_sum))
        assert_gpu_result(target, expected_target, f"allreduce_ writes through a {label} view")


def check_compression_and_autograd(rank, size, device):
    tensor = torch.arange(6, dtype=torch.float32, device=device) + rank
    expected = sum(torch.arange(6, dtype=torch.float32) + r for r in range(size))
    for label, compression in [("fp16", hvd.Compression.fp16), ("bf16", hvd.Compression.bf16)]:
        result = hvd.allreduce(tensor, op=hvd.Sum, compression=compression)
        assert_gpu_result(result, expected, f"allreduce with Compression.{label} keeps float32")
    leaf = (torch.arange(4, dtype=torch.float32, device=device) + rank).requires_grad_()
    reduced = hvd.allreduce(leaf * 2, op=hvd.Sum)
    (reduced * torch.arange(4, dtype=torch.float32, device=device)).sum().backward()
    # d/dleaf of sum_r(2 leaf_r) . w is 2 w on each rank, summed over ranks by the gradient's allreduce.
    assert_gpu_result(leaf.grad, 2.0 * size * torch.arange(4, dtype=torch.float32), "allreduce gradient")
    rows = torch.full((rank + 1, 2), float(rank), device=device, requires_grad=True)
    gathered = hvd.allgather(rows)
    assert_gpu_result(
        gathered.detach(),
        torch.cat([torch.full((r + 1, 2), float(r)) for r in range(size)]),
        "differentiable allgather",
    )
    gathered.sum().backward()
    assert_gpu_result(rows.grad, torch.ones(rank + 1, 2), "allgather gradient (averaged over ranks)")


def check_sync_free_ops(rank, size, device):
    """Submission and completion never synchronize the host with the GPU: torch raises
    on any synchronizing call it makes meanwhile."""
    tensor = torch.full((1000,), float(rank + 1), device=device)
    other = torch.full((1000,), float(2 * rank + 2), device=device)
    rows = torch.full((rank + 1, 3), float(rank), device=device)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        in_place = hvd.allreduce_async_(tensor, name="gpu.syncfree.allreduce", op=hvd.Sum)
        gather = hvd.allgather_async(rows, name="gpu.syncfree.allgather")
        out = hvd.allreduce(other, name="gpu.syncfree.sync", op=hvd.Sum)
        hvd.synchronize(in_place)
        gathered = hvd.synchronize(gather)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    total = float(size * (size + 1) // 2)
    assert_gpu_result(tensor, torch.full((1000,), total), "sync-free in-place allreduce")
    assert_gpu_result(out, torch.full((1000,), 2 * total), "sync-free synchronous allreduce")
    assert_gpu_result(
        gathered, torch.cat([torch.full((r + 1, 3), float(r)) for r in range(size)]), "sync-free allgather"
    )


def check_barrier_and_join(rank, size, device):
    hvd.barrier()
    # Rank r runs r + 1 allreduces before joining; the joined ranks stand in with zeros.
    for step in range(rank + 1):
        active = size - step  # ranks still submitting at this step: those with rank >= step
        result = hvd.allreduce(torch.ones(5, device=device), name=f"gpu.join.{step}", op=hvd.Sum)
        assert_gpu_result(result, torch.full((5,), float(active)), f"allreduce {step} while others joined")
    last = hvd.join(device=device.index)
    assert last == size - 1, f"join returned {last}, expected the last rank to join ({size - 1})"


def check_device_pinning(device):
    if torch.cuda.device_count() < 2:
        print("device pinning: one GPU on this machine, the other-device error is not exercised", flush=True)
        return
    other = torch.device("cuda", (device.index + 1) % torch.cuda.device_count())
    try:
        hvd.allreduce(torch.ones(2, device=other), name="gpu.other.device")
    except ValueError as error:
        assert "torch.cuda.set_device(hvd.local_rank())" in str(error), error
    else:
        raise AssertionError("a tensor on another GPU than the process's was accepted")


def run_checks(rank, size, device):
    """Every check that needs nothing from CUDA but its tensors."""
    check_allreduce_every_dtype_and_op(rank, size, device)
    check_allreduce_sync_and_scaling(rank, size, device)
    check_grouped_allreduce(rank, size)
    check_many_small_and_large(rank, size, device)
    check_allgather(rank, size, device)
    check_broadcast(rank, size)
    check_alltoall(rank, size)
    check_reducescatter(rank, size)
    check_mixed_cpu_and_cuda(rank, size, device)
    check_non_contiguous(rank, size, device)
    check_compression_and_autograd(rank, size, device)


def main():
    rank, size, device = start()
    staged = os.environ.get("LOCKSTEP_GPU_OPERATIONS") == "mpi"
    print(
        f"rank {rank}: {size} ranks on {device} ({torch.cuda.get_device_name(device)}), "
        f"GPU operations: {'mpi (staged)' if staged else 'nccl'}, {hvd.nccl_info()}",
        flush=True,
    )
    assert hvd.nccl_built() > 0 and hvd.cuda_built()
    run_checks(rank, size, device)
    check_sync_free_ops(rank, size, device)
    check_device_pinning(device)
    check_barrier_and_join(rank, size, device)
    hvd.shutdown()


if __name__ == "__main__":
    run_main(main)
