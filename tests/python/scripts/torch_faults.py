"""Exceptions raised by user code inside torch's backward pass, while the
DistributedOptimizer's hooks have some gradients' allreduces in flight: the error
reaches the user, optimizer.step() completes what was started (no hang, nothing
left pending), and training continues with identical parameters on every rank."""

import torch
from checks import check
from rank_checks import expect_error
from torch import nn

import lockstep.torch as hvd


class HookFailure(RuntimeError):
    pass


def make_model():
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))


def averaged_step_reference(size, lr):
    """The parameters after one SGD step on the gradients averaged over ranks."""
    model = make_model()
    grads = [torch.zeros_like(p) for p in model.parameters()]
    for rank in range(size):
        model.zero_grad()
        model(torch.full((2, 3), float(rank))).sum().backward()
        grads = [g + p.grad for g, p in zip(grads, model.parameters())]
    with torch.no_grad():
        return [p - lr * g / size for p, g in zip(model.parameters(), grads)]


def check_exception_in_backward_hook(rank, size, failing_ranks, label):
    model = make_model()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.5), named_parameters=model.named_parameters()
    )
    armed = [rank in failing_ranks]

    def user_hook(grad):  # runs after the second layer's gradients were submitted
        if armed[0]:
            raise HookFailure(f"user hook failed on rank {rank}")
        return grad

    model[0].weight.register_hook(user_hook)
    x = torch.full((2, 3), float(rank))
    if armed[0]:
        expect_error(HookFailure, ["user hook failed"], lambda: model(x).sum().backward())
        expect_error(RuntimeError, ["synchronize()", "raised"], optimizer.zero_grad)
        armed[0] = False
    else:
        model(x).sum().backward()
    # On the failing ranks, step() completes the allreduces the failed pass started
    # and submits the rest (the gradients it never computed count as zeros), so every
    # rank applies the same averaged gradients.
    optimizer.step()
    optimizer.zero_grad()
    model(x).sum().backward()
    optimizer.step()  # a clean step: the same on every rank
    params = [p.detach() for p in model.parameters()]
    gathered = hvd.allgather_object([p.clone() for p in params])
    for other in gathered:
        for mine, theirs in zip(params, other):
            assert torch.equal(mine, theirs), f"{label}: parameters differ across ranks"
    total = hvd.allreduce(torch.full((3,), float(rank)), op=hvd.Sum, name=f"after.{label}")
    assert torch.equal(total, torch.full((3,), float(sum(range(size))))), f"{label}: engine after the failure"


def check_clean_step_matches_reference(rank, size):
    model = make_model()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.5), named_parameters=model.named_parameters()
    )
    model(torch.full((2, 3), float(rank))).sum().backward()
    optimizer.step()
    for mine, want in zip(model.parameters(), averaged_step_reference(size, 0.5)):
        assert torch.allclose(mine.detach(), want, atol=1e-6), "a clean DistributedOptimizer step"


def run(rank, size):
    check(check_clean_step_matches_reference, rank, size)
    check(
        "exception_in_every_ranks_backward_hook",
        check_exception_in_backward_hook,
        rank,
        size,
        set(range(size)),
        "every.rank.hook.fails",
    )
    check("exception_in_rank_0s_backward_hook", check_exception_in_backward_hook, rank, size, {0}, "rank0.hook.fails")
