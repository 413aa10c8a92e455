"""broadcast_parameters and broadcast_optimizer_state round trips: every rank ends
with the root's parameters, buffers, hyperparameters and optimizer state, including
state the optimizer creates lazily on its first step (Adam) and nested state (LBFGS)."""

import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from torch import nn
from torch_checks import assert_identical_across_ranks, assert_tensor_equal

import lockstep.torch as hvd


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))


def train(model, optimizer, seed, steps=2):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):

        def closure():
            optimizer.zero_grad()
            loss = model(torch.randn(6, 4, generator=generator)).square().mean()
            loss.backward()
            return loss

        optimizer.step(closure)


def assert_same_structure(actual, expected, what):
    """Equal nested dicts/lists with tensors of equal dtype, shape and values."""
    if isinstance(expected, torch.Tensor):
        assert_tensor_equal(actual, expected, what)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), f"{what}: keys {actual} vs {expected}"
        for key in expected:
            assert_same_structure(actual[key], expected[key], f"{what}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), f"{what}: {actual} vs {expected}"
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_same_structure(a, e, f"{what}[{index}]")
    else:
        assert actual == expected, f"{what}: {actual!r}, expected {expected!r}"


def check_broadcast_parameters(rank, size):
    root = size - 1
    root_state = make_model(seed=root)
    root_state[1].running_mean.fill_(float(root))
    root_state[1].num_batches_tracked.fill_(root + 5)
    expected = {name: value.clone() for name, value in root_state.state_dict().items()}
    model = make_model(seed=rank)
    model[1].running_mean.fill_(float(rank))
    model[1].num_batches_tracked.fill_(rank + 5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    assert_same_structure(model.state_dict(), expected, "state_dict broadcast")

    for label, as_params in [
        ("named_parameters()", lambda m: m.named_parameters()),
        ("parameters()", lambda m: m.parameters()),
        ("list of pairs", lambda m: list(m.named_parameters())),
    ]:
        model = make_model(seed=rank + 10)
        hvd.broadcast_parameters(as_params(model), root_rank=0)
        reference = make_model(seed=10)
        for (name, value), expected_value in zip(model.named_parameters(), reference.parameters()):
            assert_tensor_equal(value.detach(), expected_value.detach(), f"{label}: {name}")

    base = torch.full((4, 6), float(rank))
    hvd.broadcast_parameters({"strided": base[:, ::2]}, root_rank=root)
    expected_base = torch.full((4, 6), float(rank))
    expected_base[:, ::2] = float(root)
    assert_tensor_equal(base, expected_base, "a strided view is written through")


def check_lazy_adam_state(rank, size):
    """Only the root has stepped (Adam's state does not exist elsewhere yet), and
    every rank has different hyperparameters."""
    root = 0
    model = make_model(seed=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1), betas=(0.8 + 0.05 * rank, 0.99))
    if rank == root:
        train(model, optimizer, seed=3)
        assert optimizer.state, "Adam created its state on the first step"
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(optimizer, root_rank=root)
    expected = hvd.broadcast_object(optimizer.state_dict() if rank == root else None, root_rank=root)
    assert_same_structure(optimizer.state_dict(), expected, "Adam state after broadcast")
    assert optimizer.param_groups[0]["lr"] == 0.01 and optimizer.param_groups[0]["betas"] == (0.8, 0.99)
    train(model, optimizer, seed=4, steps=1)
    assert_identical_across_ranks(hvd, list(model.state_dict().values()), "Adam: one more step from the same state")


def check_sgd_state_with_groups(rank, size):
    root = size - 1
    model = make_model(seed=2)
    optimizer = torch.optim.SGD(
        [{"params": model[0].parameters(), "lr": 0.1 * (rank + 1)}, {"params": model[3].parameters()}],
        lr=0.5,
        momentum=0.5 + 0.1 * rank,
        nesterov=False,
    )
    train(model, optimizer, seed=10 + rank)  # every rank has momentum buffers, all different
    distributed = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(distributed, root_rank=root)
    expected = hvd.broadcast_object(distributed.state_dict() if rank == root else None, root_rank=root)
    assert_same_structure(distributed.state_dict(), expected, "SGD state with two groups")
    assert distributed.param_groups[0]["lr"] == 0.1 * (root + 1), distributed.param_groups
    assert distributed.param_groups[1]["momentum"] == 0.5 + 0.1 * root, distributed.param_groups
    train(model, distributed, seed=30 + rank, steps=1)  # different data, averaged gradients
    # Parameters only: batch norm's running statistics follow each rank's own data.
    assert_identical_across_ranks(hvd, list(model.parameters()), "SGD + DistributedOptimizer")


def check_state_cleared_where_root_has_none(rank, size):
    model = make_model(seed=5)
    optimizer = torch.optim.Adam(model.parameters())
    if rank != 0:
        train(model, optimizer, seed=rank)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert not optimizer.state_dict()["state"], "the root had no state, so no rank keeps any"


def check_nested_lbfgs_state(rank, size):
    model = make_model(seed=6)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, history_size=3, max_iter=3)
    if rank == 1:
        train(model, optimizer, seed=7, steps=1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=1)
    hvd.broadcast_optimizer_state(optimizer, root_rank=1)
    expected = hvd.broadcast_object(optimizer.state_dict() if rank == 1 else None, root_rank=1)
    assert_same_structure(optimizer.state_dict(), expected, "LBFGS state")
    train(model, optimizer, seed=8, steps=1)
    assert_identical_across_ranks(hvd, list(model.state_dict().values()), "LBFGS after broadcast")


def run(rank, size):
    check(check_broadcast_parameters, rank, size)
    check(check_lazy_adam_state, rank, size)
    check(check_sgd_state_with_groups, rank, size)
    check(check_state_cleared_where_root_has_none, rank, size)
    check(check_nested_lbfgs_state, rank, size)
