"""Horovod parity for what ported torch scripts touch (issue 25): alltoall splits
that are not integers, DistributedOptimizer's _parameter_names, the warning for
step() after synchronize(), and .grad after broadcast_optimizer_state."""

import warnings

import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from rank_checks import expect_error
from torch import nn
from torch_checks import assert_identical_across_ranks

import lockstep.torch as hvd

HOROVOD_WARNING = (
    "optimizer.step() called without optimizer.skip_synchronize() context after optimizer.synchronize(). "
    "This can cause training slowdown. You may want to consider using optimizer.skip_synchronize() context "
    "if you use optimizer.synchronize() in your code."
)


def check_alltoall_splits_type(rank, size):
    """A splits tensor of floats or bools is Horovod's ValueError, on every rank, before
    anything is sent; integer tensors of any width work afterwards."""
    rows = torch.arange(float(size)).unsqueeze(1) + 10 * rank
    for bad in (
        torch.ones(size, dtype=torch.float32),
        torch.ones(size, dtype=torch.float64),
        torch.ones(size, dtype=torch.bool),
    ):
        expect_error(ValueError, ["splits", "integers", str(bad.dtype)], hvd.alltoall, rows, bad)
    for dtype in (torch.int32, torch.int64, torch.int16):
        received, splits = hvd.alltoall(rows, torch.ones(size, dtype=dtype))
        assert splits.tolist() == [1] * size, splits
        assert received.squeeze(1).tolist() == [rank + 10.0 * source for source in range(size)], received


def check_parameter_names(rank, size):
    """Without named_parameters, _parameter_names maps every parameter to Horovod's
    'allreduce.noname.<group>.<index>', unique and the same on every rank; with them,
    to the given names."""
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    groups = [{"params": model[0].parameters()}, {"params": model[1].parameters(), "lr": 0.5}]
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(groups, lr=0.1))
    names = optimizer._parameter_names
    ordered = [names[p] for group in optimizer.param_groups for p in group["params"]]
    assert ordered == [
        "allreduce.noname.0.0",
        "allreduce.noname.0.1",
        "allreduce.noname.1.0",
        "allreduce.noname.1.1",
    ], ordered
    everyone = hvd.allgather_object(ordered)
    assert all(other == ordered for other in everyone), everyone
    named = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    assert sorted(named._parameter_names.values()) == ["0.bias", "0.weight", "1.bias", "1.weight"], (
        named._parameter_names
    )
    assert named._parameter_names[model[1].weight] == "1.weight"
    if not size & (size - 1):  # Adasum runs on a power of two ranks
        adasum = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum)
        assert list(adasum._parameter_names.values()) == [
            "allreduce.noname.0.0",
            "allreduce.noname.0.1",
            "allreduce.noname.0.2",
            "allreduce.noname.0.3",
        ]


def check_double_synchronize_warning(rank, size):
    """step() after synchronize() outside skip_synchronize() warns with Horovod's
    words, once per optimizer; inside skip_synchronize() it does not warn."""
    torch.manual_seed(3)
    model = nn.Linear(2, 1)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.ones(1, 2) * (rank + 1)).sum().backward()
            optimizer.synchronize()
            with optimizer.skip_synchronize():
                optimizer.step()
        assert not caught, [str(w.message) for w in caught]
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.ones(1, 2) * (rank + 1)).sum().backward()
            optimizer.synchronize()
            optimizer.step()
    messages = [str(w.message) for w in caught]
    assert messages == [HOROVOD_WARNING], messages
    assert_identical_across_ranks(hvd, list(model.parameters()), "double synchronize")


def check_gradients_after_state_broadcast(rank, size):
    """After broadcast_optimizer_state on fresh optimizers, trainable parameters have a
    (zero) .grad, as Horovod leaves them, and frozen ones have none."""
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    model[0].bias.requires_grad_(False)
    for cls, options in ((torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}), (torch.optim.Adam, {"lr": 0.01})):
        for param in model.parameters():
            param.grad = None
        optimizer = hvd.DistributedOptimizer(
            cls(model.parameters(), **options), named_parameters=model.named_parameters()
        )
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        for name, param in model.named_parameters():
            if param.requires_grad:
                assert param.grad is not None and not param.grad.any(), f"{cls.__name__}: {name}.grad {param.grad}"
            else:
                assert param.grad is None, f"{cls.__name__}: frozen {name} got a .grad"
        model(torch.ones(1, 2) * (rank + 1)).sum().backward()
        optimizer.step()  # the zero gradients do not disturb training
        assert_identical_across_ranks(hvd, list(model.parameters()), f"trained after {cls.__name__} broadcast")


def run(rank, size):
    check(check_alltoall_splits_type, rank, size)
    check(check_parameter_names, rank, size)
    check(check_double_synchronize_warning, rank, size)
    check(check_gradients_after_state_broadcast, rank, size)
