"""DistributedOptimizer: N ranks training on N shards end where one process training
on the whole batch ends (float tolerance), with every rank bitwise identical;
gradient accumulation, groups, compression, Sum, predivision, SyncBatchNorm, sparse
gradients, unused parameters, gradient clipping, misuse errors and join()."""

import os
import warnings

import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from rank_checks import expect_error
from torch import nn
from torch_checks import assert_close, assert_identical_across_ranks

import lockstep.torch as hvd

FEATURES, HIDDEN, CLASSES, BATCH = 6, 8, 3, 4


def make_model(norm=None, seed=3):
    torch.manual_seed(seed)
    layers = [nn.Linear(FEATURES, HIDDEN)]
    if norm is not None:
        layers.append(norm(HIDDEN))
    layers += [nn.Tanh(), nn.Linear(HIDDEN, CLASSES)]
    return nn.Sequential(*layers)


def dataset(examples, seed=11):
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(examples, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (examples,), generator=generator)
    return inputs, labels


def block(data, index):
    """The index-th block of BATCH examples."""
    inputs, labels = data
    return inputs[index * BATCH : (index + 1) * BATCH], labels[index * BATCH : (index + 1) * BATCH]


def loss_of(model, batch, scale=1.0):
    inputs, labels = batch
    return nn.functional.cross_entropy(model(inputs), labels) * scale


def train_reference(model, optimizer, data, steps, blocks_per_step, loss_scale=1.0, clip=None):
    """One process, each step on all the blocks the ranks see together."""
    for step in range(steps):
        first = step * blocks_per_step
        batch = tuple(torch.cat(parts) for parts in zip(*[block(data, first + i) for i in range(blocks_per_step)]))
        optimizer.zero_grad()
        loss_of(model, batch, loss_scale).backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()


def train_distributed(model, optimizer, data, steps, passes, rank, size, clip=None):
    """Each rank, each step: `passes` backward passes on its own blocks."""
    for step in range(steps):
        optimizer.zero_grad()
        for backward_pass in range(passes):
            index = (step * passes + backward_pass) * size + rank
            loss_of(model, block(data, index), 1.0 / passes).backward()
        if clip is None:
            optimizer.step()
        else:
            optimizer.synchronize()
            nn.utils.clip_grad_norm_(model.parameters(), clip)
            with optimizer.skip_synchronize():
                optimizer.step()


def compare_with_single_process(
    rank,
    size,
    label,
    make_optimizer,
    passes=1,
    steps=4,
    norm=None,
    reference_norm=None,
    atol=2e-5,
    loss_scale=1.0,
    clip=None,
    **options,
):
    data = dataset(steps * passes * size * BATCH)
    reference = make_model(reference_norm)
    train_reference(reference, make_optimizer(reference.parameters()), data, steps, passes * size, loss_scale, clip)
    model = make_model(norm)
    optimizer = hvd.DistributedOptimizer(
        make_optimizer(model.parameters()),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=passes,
        **options,
    )
    train_distributed(model, optimizer, data, steps, passes, rank, size, clip)
    expected = reference.state_dict()
    for name, value in model.state_dict().items():
        if value.dtype.is_floating_point:
            assert_close(value, expected[name], f"{label}: {name}", atol=atol, rtol=atol)
    assert_identical_across_ranks(hvd, list(model.state_dict().values()), label)


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-3)


def adam(params):
    return torch.optim.Adam(params, lr=0.01)


def check_equivalence(rank, size):
    compare_with_single_process(rank, size, "SGD", sgd)
    compare_with_single_process(rank, size, "Adam", adam)
    compare_with_single_process(rank, size, "SGD, 3 backward passes per step", sgd, passes=3)
    compare_with_single_process(rank, size, "Adam, 2 passes, 2 groups", adam, passes=2, groups=2)
    compare_with_single_process(rank, size, "SGD, predivide 2", sgd, gradient_predivide_factor=2.0)
    compare_with_single_process(rank, size, "SGD, op=Sum", sgd, op=hvd.Sum, loss_scale=float(size))
    compare_with_single_process(rank, size, "SGD, fp16 compression", sgd, compression=hvd.Compression.fp16, atol=2e-3)
    compare_with_single_process(rank, size, "Adam, bf16 compression", adam, compression=hvd.Compression.bf16, atol=3e-2)
    compare_with_single_process(
        rank, size, "SGD, SyncBatchNorm", sgd, norm=hvd.SyncBatchNorm, reference_norm=nn.BatchNorm1d
    )
    compare_with_single_process(rank, size, "SGD, clipped after synchronize()", sgd, clip=0.05)


def check_explicit_groups_and_default_names(rank, size):
    model = make_model()
    first, second = model[0], model[2]
    optimizer = hvd.DistributedOptimizer(sgd(model.parameters()), groups=[[first.weight, second.bias], [first.bias]])
    data = dataset(size * BATCH, seed=5)
    train_distributed(model, optimizer, data, 1, 1, rank, size)
    reference = make_model()
    train_reference(reference, sgd(reference.parameters()), data, 1, size)
    for (name, value), expected in zip(model.state_dict().items(), reference.state_dict().values()):
        assert_close(value, expected, f"explicit groups, default names: {name}")


def check_buckets(rank, size):
    """By default gradients go to the core in buckets, each bucket once all its
    gradients are ready; every way of handing them over ends at the same bits."""
    data = dataset(3 * size * BATCH, seed=7)
    # (LOCKSTEP_GRADIENT_BUCKET_BYTES, groups, allreduces in flight after backward)
    settings = {
        "buckets of at least 64 bytes": ("64", None, 2),  # [bias 2, weight 2], [bias 1, weight 1]
        "one bucket (the default size)": (None, None, 1),
        "each gradient alone (groups=0)": (None, 0, 4),
        "each gradient alone (bucket bytes 0)": ("0", None, 4),
    }
    final = {}
    for label, (bucket_bytes, groups, in_flight) in settings.items():
        previous = os.environ.pop("LOCKSTEP_GRADIENT_BUCKET_BYTES", None)
        if bucket_bytes is not None:
            os.environ["LOCKSTEP_GRADIENT_BUCKET_BYTES"] = bucket_bytes
        try:
            model = make_model()
            optimizer = hvd.DistributedOptimizer(sgd(model.parameters()), model.named_parameters(), groups=groups)
        finally:
            os.environ.pop("LOCKSTEP_GRADIENT_BUCKET_BYTES", None)
            if previous is not None:
                os.environ["LOCKSTEP_GRADIENT_BUCKET_BYTES"] = previous
        for step in range(3):
            optimizer.zero_grad()
            loss_of(model, block(data, step * size + rank)).backward()
            # Submitted from the hooks, during backward: none waits for step().
            submitted = len(optimizer._lockstep_reducer._in_flight)
            assert submitted == in_flight, f"{label}: {submitted} submissions during backward, expected {in_flight}"
            optimizer.step()
        final[label] = torch.cat([param.detach().reshape(-1) for param in model.parameters()])
    reference = final["each gradient alone (groups=0)"]
    for label, params in final.items():
        assert torch.equal(params, reference), f"{label}: parameters differ from reducing each gradient alone"
    assert_identical_across_ranks(hvd, [reference], "buckets")
    os.environ["LOCKSTEP_GRADIENT_BUCKET_BYTES"] = "-1"
    try:
        expect_error(
            ValueError, ["LOCKSTEP_GRADIENT_BUCKET_BYTES", ">= 0"], hvd.DistributedOptimizer, sgd(model.parameters())
        )
    finally:
        del os.environ["LOCKSTEP_GRADIENT_BUCKET_BYTES"]


def check_sparse_gradients(rank, size):
    for sparse_as_dense in (False, True):
        data = (torch.randint(0, 10, (size * 2 * BATCH, 3), generator=torch.Generator().manual_seed(1)),)
        models = []
        for sparse in (True, False):
            torch.manual_seed(4)
            models.append(nn.Sequential(nn.EmbeddingBag(10, 5, mode="sum", sparse=sparse), nn.Linear(5, 2)))
        model, reference = models
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.5),
            named_parameters=model.named_parameters(),
            sparse_as_dense=sparse_as_dense,
        )
        reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
        for step in range(2):
            rows = data[0][step * size * BATCH : (step + 1) * size * BATCH]
            reference_optimizer.zero_grad()
            reference(rows).square().mean().backward()
            reference_optimizer.step()
            optimizer.zero_grad()
            model(rows[rank * BATCH : (rank + 1) * BATCH]).square().mean().backward()
            optimizer.step()
        for (name, value), expected in zip(model.state_dict().items(), reference.state_dict().values()):
            assert_close(value, expected, f"sparse gradients (sparse_as_dense={sparse_as_dense}): {name}")
        assert_identical_across_ranks(hvd, list(model.state_dict().values()), f"sparse {sparse_as_dense}")


def check_unused_parameters(rank, size):
    """A parameter only rank 0 uses still reduces: the others contribute zeros."""
    used = nn.Parameter(torch.zeros(3))
    rare = nn.Parameter(torch.zeros(2))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD([used, rare], lr=1.0), named_parameters=[("used", used), ("rare", rare)]
    )
    optimizer.zero_grad()
    loss = (used * (rank + 1)).sum()
    if rank == 0:
        loss = loss + (rare * torch.tensor([2.0, 4.0])).sum()
    loss.backward()
    optimizer.step()
    mean_scale = sum(r + 1 for r in range(size)) / size
    assert_close(used.detach(), torch.full((3,), -mean_scale), "used parameter")
    assert_close(rare.detach(), -torch.tensor([2.0, 4.0]) / size, "parameter used on rank 0 only")


def check_non_contiguous_gradients(rank, size):
    """A bucket holding a gradient the core cannot write in place (a channels_last conv
    weight, a transposed view) goes through the path that copies results back; the
    plain gradients in the same bucket are averaged too."""
    conv = nn.Parameter(torch.zeros(4, 3, 2, 2).to(memory_format=torch.channels_last))
    plain = nn.Parameter(torch.zeros(5))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD([conv, plain], lr=1.0), named_parameters=[("conv", conv), ("plain", plain)]
    )
    for step in range(2):
        optimizer.zero_grad()
        ((conv * (rank + 1 + step)).sum() + (plain * (rank + 2)).sum()).backward()
        assert not conv.grad.is_contiguous(), "the test needs a non-contiguous gradient"
        optimizer.step()
    mean = lambda offset: sum(r + offset for r in range(size)) / size  # noqa: E731
    assert_close(conv.detach(), torch.full((4, 3, 2, 2), -(mean(1) + mean(2))), "channels_last gradient")
    assert_close(plain.detach(), torch.full((5,), -2 * mean(2)), "plain gradient in the same bucket")
    assert_identical_across_ranks(hvd, [conv.detach(), plain.detach()], "non-contiguous gradients")


def check_misuse(rank, size):
    model = make_model()
    optimizer = hvd.DistributedOptimizer(sgd(model.parameters()), named_parameters=model.named_parameters())
    data = dataset(BATCH)
    loss_of(model, block(data, 0)).backward()
    expect_error(RuntimeError, ["zero_grad", "before optimizer.step()"], optimizer.zero_grad)
    expect_error(
        RuntimeError, ["more than backward_passes_per_step=1"], lambda: loss_of(model, block(data, 0)).backward()
    )
    optimizer.synchronize()  # the failed pass left gradients half-submitted; this completes them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.step()
    assert any("skip_synchronize" in str(w.message) for w in caught), "step() after synchronize() warns"
    optimizer.zero_grad()
    model = make_model()  # a fresh model: the first optimizer's hooks stay on the old one
    accumulating = hvd.DistributedOptimizer(
        sgd(model.parameters()), named_parameters=model.named_parameters(), backward_passes_per_step=2
    )
    for _ in range(2):
        loss_of(model, block(data, 0)).backward()
    expect_error(RuntimeError, ["backward_passes_per_step=2"], lambda: loss_of(model, block(data, 0)).backward())
    accumulating.synchronize()
    accumulating.zero_grad()
    accumulating.synchronize()  # nothing pending: allreduces the zero gradients harmlessly


def check_optimizer_protocols(rank, size):
    model = make_model()
    optimizer = hvd.DistributedOptimizer(sgd(model.parameters()), named_parameters=model.named_parameters())
    assert isinstance(optimizer, torch.optim.SGD), type(optimizer).__mro__
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    data = dataset(size * BATCH, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # e.g. "lr_scheduler.step() before optimizer.step()"
        train_distributed(model, optimizer, data, 1, 1, rank, size)
        scheduler.step()
    assert optimizer.param_groups[0]["lr"] == 0.05, optimizer.param_groups[0]["lr"]
    plain = sgd(make_model().parameters())
    plain.load_state_dict(optimizer.state_dict())
    assert plain.param_groups[0]["lr"] == 0.05 and len(plain.state) == len(optimizer.state)


def check_join_with_uneven_data(rank, size):
    """Rank r trains r + 1 steps, then joins: the ranks still training average over
    all ranks with the joined ones' gradients as zeros."""
    steps_of = [r + 1 for r in range(size)]
    data = dataset(max(steps_of) * size * BATCH, seed=21)
    model = make_model()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.2), named_parameters=model.named_parameters()
    )
    for step in range(steps_of[rank]):
        optimizer.zero_grad()
        loss_of(model, block(data, step * size + rank)).backward()
        optimizer.step()
    last = hvd.join()
    assert last == size - 1, f"join returned {last}; rank {size - 1} joins last"
    hvd.broadcast_parameters(model.state_dict(), root_rank=last)
    reference = _join_reference(data, steps_of, size)
    for (name, value), expected in zip(model.state_dict().items(), reference.state_dict().values()):
        assert_close(value, expected, f"join: {name}")


def _join_reference(data, steps_of, size):
    model = make_model()
    for step in range(max(steps_of)):
        active = [r for r in range(size) if steps_of[r] > step]
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for r in active:
            model.zero_grad()
            loss_of(model, block(data, step * size + r)).backward()
            grads = [g + p.grad for g, p in zip(grads, model.parameters())]
        with torch.no_grad():
            for param, grad in zip(model.parameters(), grads):
                param -= 0.2 * grad / size
    return model


def run(rank, size):
    check(check_equivalence, rank, size)
    check(check_explicit_groups_and_default_names, rank, size)
    check(check_buckets, rank, size)
    check(check_sparse_gradients, rank, size)
    check(check_unused_parameters, rank, size)
    check(check_non_contiguous_gradients, rank, size)
    check(check_misuse, rank, size)
    check(check_optimizer_protocols, rank, size)
    check(check_join_with_uneven_data, rank, size)
