"""Gradients of the differentiable collectives, checked against Horovod's
definitions, and SyncBatchNorm against plain batch norm on the whole batch.

Every rank backpropagates an upstream gradient that depends on its rank, and
knows every other rank's, so it can compute the expected gradient itself.
"""

import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from torch_checks import assert_close, assert_tensor_equal

import lockstep.torch as hvd

GRAD_DTYPES = [torch.float32, torch.float64]


def upstream(rank, shape, dtype, salt=0):
    """The gradient rank `rank` feeds into backward: small exact values."""
    count = 1
    for dim in shape:
        count *= dim
    values = (torch.arange(count, dtype=torch.float64) % 7 + 3 * rank + salt) / 4
    return values.reshape(shape).to(dtype)


def check_allreduce_gradients(rank, size):
    for dtype in GRAD_DTYPES:
        for op, prescale, postscale in [
            (hvd.Sum, 1.0, 1.0),
            (hvd.Average, 1.0, 1.0),
            (hvd.Sum, 2.0, 0.25),
            (hvd.Average, 0.5, 3.0),
        ]:
            x = torch.ones(3, 4, dtype=dtype, requires_grad=True)
            y = hvd.allreduce(x, op=op, prescale_factor=prescale, postscale_factor=postscale)
            y.backward(upstream(rank, (3, 4), dtype))
            total = sum(upstream(r, (3, 4), dtype) for r in range(size)) * prescale * postscale
            expected = total / size if op == hvd.Average else total
            assert_tensor_equal(x.grad, expected, f"allreduce grad {dtype} op {op} scale {prescale}*{postscale}")
    x = torch.ones(5, requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    y.backward(upstream(rank, (5,), torch.float32))
    assert_tensor_equal(x.grad, sum(upstream(r, (5,), torch.float32) for r in range(size)), "fp16-compressed grad")


def check_grouped_allreduce_gradients(rank, size):
    a = torch.ones(4, requires_grad=True)
    b = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    ya, yb = hvd.grouped_allreduce([a, b], op=hvd.Average)
    torch.autograd.backward([ya, yb], [upstream(rank, (4,), torch.float32), upstream(rank, (2, 3), torch.float64, 1)])
    assert_tensor_equal(a.grad, sum(upstream(r, (4,), torch.float32) for r in range(size)) / size, "grouped grad a")
    assert_tensor_equal(
        b.grad, sum(upstream(r, (2, 3), torch.float64, 1) for r in range(size)) / size, "grouped grad b"
    )


def check_allgather_gradients(rank, size):
    rows = [r + 1 for r in range(size)]
    total_rows = sum(rows)
    offset = sum(rows[:rank])
    for dtype in GRAD_DTYPES:
        x = torch.zeros(rows[rank], 3, dtype=dtype, requires_grad=True)
        gathered = hvd.allgather(x)
        assert gathered.shape == (total_rows, 3), gathered.shape
        gathered.backward(upstream(rank, (total_rows, 3), dtype))
        averaged = sum(upstream(r, (total_rows, 3), dtype) for r in range(size)) / size
        assert_tensor_equal(x.grad, averaged[offset : offset + rows[rank]], f"allgather grad {dtype}")


def check_broadcast_gradients(rank, size):
    for root in range(size):
        x = torch.zeros(2, 5, requires_grad=True)
        hvd.broadcast(x, root_rank=root).backward(upstream(rank, (2, 5), torch.float32))
        averaged = sum(upstream(r, (2, 5), torch.float32) for r in range(size)) / size
        expected = averaged if rank == root else torch.zeros(2, 5)
        assert_tensor_equal(x.grad, expected, f"broadcast grad from root {root}")


def check_alltoall_gradients(rank, size):
    splits_of = [[(r + j) % 3 + 1 for j in range(size)] for r in range(size)]
    received_rows = [sum(splits_of[r][j] for r in range(size)) for j in range(size)]
    x = torch.zeros(sum(splits_of[rank]), 2, dtype=torch.float64, requires_grad=True)
    received, received_splits = hvd.alltoall(x, splits=splits_of[rank])
    assert not received_splits.requires_grad, "received splits are not differentiable"
    received.backward(upstream(rank, (received_rows[rank], 2), torch.float64))
    # Row block sent to rank j lands at offset sum(splits_of[k][j] for k < rank) of j's output.
    blocks = []
    for j in range(size):
        start = sum(splits_of[k][j] for k in range(rank))
        blocks.append(upstream(j, (received_rows[j], 2), torch.float64)[start : start + splits_of[rank][j]])
    assert_tensor_equal(x.grad, torch.cat(blocks), "alltoall grad")
    y = torch.zeros(2 * size, requires_grad=True)
    hvd.alltoall(y).backward(upstream(rank, (2 * size,), torch.float32))
    expected = torch.cat([upstream(j, (2 * size,), torch.float32)[2 * rank : 2 * rank + 2] for j in range(size)])
    assert_tensor_equal(y.grad, expected, "alltoall grad without splits")


def check_reducescatter_gradients(rank, size):
    rows = 2 * size + 1
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    for op, prescale in [(hvd.Sum, 1.0), (hvd.Average, 1.0), (hvd.Sum, 2.0)]:
        x = torch.zeros(rows, 3, requires_grad=True)
        hvd.reducescatter(x, op=op, prescale_factor=prescale).backward(upstream(rank, (counts[rank], 3), torch.float32))
        # Horovod's definition: the allgather of the output gradients, times the size
        # for Sum (the gradient of allreduce is the same allreduce), times the scale.
        scale = prescale * size if op == hvd.Sum else prescale
        expected = torch.cat([upstream(r, (counts[r], 3), torch.float32) for r in range(size)]) * scale
        assert_tensor_equal(x.grad, expected, f"reducescatter grad op {op} prescale {prescale}")


def check_sync_batch_norm(rank, size):
    """N ranks with SyncBatchNorm on their shards == BatchNorm on the concatenated batch."""
    for shape_tail, reference_class in [
        ((3,), torch.nn.BatchNorm1d),
        ((3, 5), torch.nn.BatchNorm1d),
        ((3, 4, 4), torch.nn.BatchNorm2d),
    ]:
        for momentum in (0.1, None):
            _compare_sync_batch_norm(rank, size, shape_tail, reference_class, momentum)


def _compare_sync_batch_norm(rank, size, shape_tail, reference_class, momentum):
    what = f"SyncBatchNorm {shape_tail} momentum {momentum}"
    batch_of = [r + 2 for r in range(size)]  # uneven batches
    generator = torch.Generator().manual_seed(7)
    inputs = [
        torch.randn((batch_of[r],) + shape_tail, generator=generator, dtype=torch.float64) * 3 + 1 for r in range(size)
    ]
    upstreams = [
        torch.randn((batch_of[r],) + shape_tail, generator=generator, dtype=torch.float64) for r in range(size)
    ]
    channels = shape_tail[0]
    synced = hvd.SyncBatchNorm(channels, momentum=momentum).double()
    reference = reference_class(channels, momentum=momentum).double()
    with torch.no_grad():
        for module in (synced, reference):
            module.weight.copy_(torch.linspace(0.5, 2.0, channels))
            module.bias.copy_(torch.linspace(-1.0, 1.0, channels))
    for step in range(2):
        x = inputs[rank].clone().requires_grad_()
        out = synced(x)
        out.backward(upstreams[rank])
        full = torch.cat(inputs).requires_grad_()
        expected = reference(full)
        expected.backward(torch.cat(upstreams))
        start = sum(batch_of[:rank])
        assert_close(out, expected[start : start + batch_of[rank]].detach(), f"{what} step {step} output")
        assert_close(x.grad, full.grad[start : start + batch_of[rank]], f"{what} step {step} input grad")
        for name in ("weight", "bias"):
            summed = hvd.allreduce(getattr(synced, name).grad, op=hvd.Sum)
            assert_close(summed, getattr(reference, name).grad, f"{what} step {step} {name} grad summed over ranks")
        assert_close(synced.running_mean, reference.running_mean, f"{what} running mean")
        assert_close(synced.running_var, reference.running_var, f"{what} running var")
        for module in (synced, reference):
            module.zero_grad()
    synced.eval()
    reference.eval()
    assert_close(synced(inputs[rank]), reference(inputs[rank]), f"{what} eval uses running statistics")


def run(rank, size):
    check(check_allreduce_gradients, rank, size)
    check(check_grouped_allreduce_gradients, rank, size)
    check(check_allgather_gradients, rank, size)
    check(check_broadcast_gradients, rank, size)
    check(check_alltoall_gradients, rank, size)
    check(check_reducescatter_gradients, rank, size)
    check(check_sync_batch_norm, rank, size)
