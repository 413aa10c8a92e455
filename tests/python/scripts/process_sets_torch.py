"""Process sets with the torch frontend: DistributedOptimizer averaging gradients
over its set only, broadcast_parameters / broadcast_optimizer_state within a set,
and the differentiable collectives, whose gradients run on the same set."""

import os

import torch
from checks import check
from rank_checks import run_main

import lockstep.torch as hvd


def assert_close(actual, expected, what):
    assert torch.equal(actual, expected), f"{what}: got {actual}, expected {expected}"


def check_optimizer(me, my_set, other_set):
    model = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), process_set=my_set)
    for _step in range(2):
        optimizer.zero_grad()
        model(torch.full((1, 3), float(me + 1))).sum().backward()  # gradient: me + 1 everywhere
        optimizer.step()
    mean = sum(r + 1 for r in my_set.ranks) / len(my_set.ranks)
    assert_close(model.weight.detach(), torch.full((1, 3), 1.0 - 2 * mean), "weights after two averaged steps")
    # Outside its set, as in Horovod, the optimizer communicates nothing: step() and
    # synchronize() use this rank's own gradient (no other rank submits anything).
    outside = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        outside.weight.fill_(1.0)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(outside.parameters(), lr=1.0), process_set=other_set)
    outside(torch.full((1, 3), float(me + 1))).sum().backward()
    optimizer.synchronize()
    with optimizer.skip_synchronize():
        optimizer.step()
    assert_close(outside.weight.detach(), torch.full((1, 3), 1.0 - (me + 1)), "a step outside the set")


def check_state_broadcast(me, my_set):
    root = my_set.ranks[-1]
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        for param in model.parameters():
            param.fill_(float(me))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (me + 1), momentum=0.5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root, process_set=my_set)
    hvd.broadcast_optimizer_state(optimizer, root_rank=root, process_set=my_set)
    for param in model.parameters():
        assert_close(param.detach(), torch.full_like(param, float(root)), "parameters from the set's root")
    assert optimizer.param_groups[0]["lr"] == 0.1 * (root + 1), optimizer.param_groups[0]["lr"]


def check_differentiable_ops(me, my_set):
    n, mine, ranks = len(my_set.ranks), my_set.rank(), my_set.ranks
    x = torch.full((2,), float(me), requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum, process_set=my_set).sum().backward()
    assert_close(x.grad, torch.full((2,), float(n)), "allreduce gradient summed over the set")
    rows = torch.full((mine + 1, 2), float(me), requires_grad=True)
    gathered = hvd.allgather(rows, process_set=my_set)
    assert gathered.shape[0] == sum(range(1, n + 1)), gathered.shape
    gathered.sum().backward()
    assert_close(rows.grad, torch.ones(mine + 1, 2), "allgather gradient: this rank's rows of the average")
    y = torch.arange(2.0 * n) + me
    scattered = hvd.reducescatter(y, op=hvd.Sum, process_set=my_set)
    assert_close(scattered, torch.arange(2.0 * mine, 2.0 * mine + 2) * n + sum(ranks), "reducescatter")
    received = hvd.alltoall(torch.tensor([[100.0 * me + d] for d in ranks]), process_set=my_set)
    assert_close(received, torch.tensor([[100.0 * s + me] for s in ranks]), "alltoall")
    assert_close(
        hvd.broadcast(torch.tensor([float(me)]), root_rank=ranks[0], process_set=my_set),
        torch.tensor([float(ranks[0])]),
        "broadcast",
    )
    handle = hvd.allreduce_async_(torch.tensor([float(me)]), op=hvd.Max, process_set=my_set)
    assert_close(hvd.synchronize(handle), torch.tensor([float(max(ranks))]), "allreduce_async_")
    assert hvd.allgather_object(me, process_set=my_set) == ranks, "allgather_object"
    hvd.barrier(process_set=my_set)


def main():
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    even = hvd.ProcessSet([r for r in range(size) if r % 2 == 0])
    hvd.init(process_sets=[even])
    odd = hvd.add_process_set([r for r in range(size) if r % 2 == 1])
    me = hvd.rank()
    my_set, other_set = (even, odd) if me % 2 == 0 else (odd, even)
    check(check_optimizer, me, my_set, other_set)
    check(check_state_broadcast, me, my_set)
    check(check_differentiable_ops, me, my_set)
    check(check_global_op_after_the_set_ops, me, size)


def check_global_op_after_the_set_ops(me, size):
    total = hvd.allreduce(torch.tensor([float(me)]), op=hvd.Sum)
    assert_close(total, torch.tensor([float(sum(range(size)))]), "global op after the set ops")


if __name__ == "__main__":
    run_main(main)
