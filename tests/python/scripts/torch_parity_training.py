"""Horovod parity for lockstep.torch's training helpers: sparse embeddings trained
with SparseAdam (and sparse_as_dense), DistributedOptimizer(op=hvd.Adasum),
broadcast_optimizer_state for every torch.optim optimizer, and automatic parameter
names without named_parameters."""

import copy
import warnings

import numpy as np
import torch
import torch_checks  # noqa: F401 - sets one thread per rank before torch loads
from checks import check
from rank_checks import expect_error
from torch import nn
from torch_checks import assert_close, assert_identical_across_ranks, assert_tensor_equal
from torch_parity_collectives import adasum_tree_reference

import lockstep.torch as hvd

VOCAB, DIM = 12, 4


def embedding_model(seed=5):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Embedding(VOCAB, DIM, sparse=True), nn.Flatten(), nn.Linear(2 * DIM, 1))


def tokens(rank, step):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randint(0, VOCAB, (3, 2), generator=generator)


def check_sparse_embeddings(rank, size):
    """SparseAdam on the embedding (sparse gradients gathered as Horovod does) and Adam
    on the rest, against one process stepping on the average of all ranks' gradients."""
    for sparse_as_dense in (False, True):
        model = embedding_model()
        reference = copy.deepcopy(model)

        def optimizers(m):
            # As in Horovod's test, SparseAdam works either way: with sparse_as_dense the
            # gradient is reduced densely and handed back sparse.
            return [
                torch.optim.SparseAdam(list(m[0].parameters()), lr=0.05),
                torch.optim.Adam(list(m[2].parameters()), lr=0.05),
            ]

        distributed = [
            hvd.DistributedOptimizer(
                opt,
                named_parameters=[
                    (n, p)
                    for n, p in model.named_parameters()
                    if any(p is q for g in opt.param_groups for q in g["params"])
                ],
                sparse_as_dense=sparse_as_dense,
            )
            for opt in optimizers(model)
        ]
        local = optimizers(reference)
        for step in range(3):
            for opt in distributed:
                opt.zero_grad()
            model(tokens(rank, step)).sum().backward()
            assert model[0].weight.grad.is_sparse, "the embedding's gradient is sparse"
            for opt in distributed:
                opt.step()
            assert model[0].weight.grad.is_sparse, f"the reduced gradient is sparse again ({sparse_as_dense})"
            for opt in local:
                opt.zero_grad()
            grads = []
            for r in range(size):
                reference.zero_grad()
                reference(tokens(r, step)).sum().backward()
                grads.append([p.grad.to_dense() for p in reference.parameters()])
            for param, per_rank in zip(reference.parameters(), zip(*grads)):
                mean = sum(per_rank) / size
                param.grad = mean.to_sparse() if param is reference[0].weight else mean
            for opt in local:
                opt.step()
        for (name, value), expected in zip(model.state_dict().items(), reference.state_dict().values()):
            assert_close(value, expected, f"sparse embedding (sparse_as_dense={sparse_as_dense}): {name}")
        assert_identical_across_ranks(hvd, list(model.state_dict().values()), f"sparse embedding {sparse_as_dense}")


def check_adasum_optimizer(rank, size):
    model = nn.Linear(3, 2)
    sgd = torch.optim.SGD(model.parameters(), lr=0.5)
    if size & (size - 1):
        expect_error(
            NotImplementedError,
            ["adasum", "power-of-2"],
            hvd.DistributedOptimizer,
            sgd,
            named_parameters=model.named_parameters(),
            op=hvd.Adasum,
        )
        return
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    start = [p.detach().clone() for p in model.parameters()]
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.5), named_parameters=model.named_parameters(), op=hvd.Adasum
    )
    inputs = torch.tensor([[1.0, 2.0, -1.0]]) * (rank + 1)
    model(inputs).pow(2).sum().backward()
    optimizer.step()
    # Reference: every rank's SGD update (-lr * gradient), combined by Adasum.
    updates = []
    for r in range(size):
        twin = nn.Linear(3, 2)
        with torch.no_grad():
            for p, s in zip(twin.parameters(), start):
                p.copy_(s)
        twin(torch.tensor([[1.0, 2.0, -1.0]]) * (r + 1)).pow(2).sum().backward()
        updates.append([(p - 0.5 * p.grad).detach() - s for p, s in zip(twin.parameters(), start)])
    for index, (param, s) in enumerate(zip(model.parameters(), start)):
        combined = adasum_tree_reference([u[index].double().reshape(-1) for u in updates], np.float32)
        combined = combined.reshape(param.shape)
        assert_close(
            param.detach(), s + torch.from_numpy(combined), f"Adasum optimizer param {index}", atol=1e-6, rtol=1e-6
        )
    assert_identical_across_ranks(hvd, list(model.parameters()), "Adasum optimizer")
    expect_error(
        ValueError,
        ["gradient_predivide_factor"],
        hvd.DistributedOptimizer,
        torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1),
        op=hvd.Adasum,
        gradient_predivide_factor=2.0,
    )


def all_optimizers():
    """Every optimizer class torch.optim exports."""
    return {
        name: getattr(torch.optim, name)
        for name in dir(torch.optim)
        if isinstance(getattr(torch.optim, name), type)
        and issubclass(getattr(torch.optim, name), torch.optim.Optimizer)
        and getattr(torch.optim, name) is not torch.optim.Optimizer
    }


OPTIONS = {
    "SGD": [{"lr": 0.1, "momentum": 0.9}, {"lr": torch.tensor(0.1), "momentum": 0.9}],
    "Adam": [{"lr": 0.01, "betas": (0.8, 0.9)}, {"lr": torch.tensor(0.01), "amsgrad": True}],
    "AdamW": [{"lr": 0.01, "weight_decay": 0.1}, {"lr": torch.tensor(0.01)}],
    "RMSprop": [{"lr": 0.01, "momentum": 0.5, "centered": True}],
    "Rprop": [{"lr": 0.01, "etas": (0.4, 1.3)}],
    "LBFGS": [{"lr": 0.5, "history_size": 3}],
}


def check_broadcast_optimizer_state_all(rank, size):
    classes = all_optimizers()
    assert {"SGD", "Adam", "LBFGS", "SparseAdam", "Adagrad"} <= set(classes), sorted(classes)
    for name, cls in sorted(classes.items()):
        for index, options in enumerate(OPTIONS.get(name, [{"lr": 0.01}])):
            what = f"{name} {options}"
            torch.manual_seed(3)
            sparse = name == "SparseAdam"
            model = nn.Sequential(nn.Embedding(5, 3, sparse=sparse), nn.Flatten(), nn.Linear(6, 2), nn.Linear(2, 2))
            unused = model[3]  # never gets a gradient: it has no state anywhere
            params = (
                list(model[0].parameters())
                if sparse
                else list(model[0].parameters()) + list(model[2].parameters()) + list(unused.parameters())
            )
            if name == "Muon":  # orthogonalizes matrices: 2-D parameters only
                params = [p for p in params if p.dim() == 2]
            options = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in options.items()}
            optimizer = cls(params, **options)
            if rank == 0:  # only the root has stepped: the others have no state at all

                def closure():
                    optimizer.zero_grad()
                    loss = model[2](model[1](model[0](torch.tensor([[1, 3]])))).sum()
                    loss.backward()
                    return loss

                for _ in range(2):
                    optimizer.step(closure)
            else:  # and the others start from different hyperparameters
                for group in optimizer.param_groups:
                    group["lr"] = group["lr"] * 3
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)
            expected = hvd.broadcast_object(
                optimizer.state_dict() if rank == 0 else None, root_rank=0, name=f"expected.{name}.{index}"
            )
            _assert_same(optimizer.state_dict(), expected, what)


def _assert_same(actual, expected, what):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{what}: {type(actual).__name__}, expected a tensor"
        assert_tensor_equal(actual, expected, what)
    elif isinstance(expected, dict):
        assert set(actual) == set(expected), f"{what}: keys {sorted(map(str, actual))} vs {sorted(map(str, expected))}"
        for key in expected:
            _assert_same(actual[key], expected[key], f"{what}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{what}: length {len(actual)}, expected {len(expected)}"
        for index, (a, e) in enumerate(zip(actual, expected)):
            _assert_same(a, e, f"{what}[{index}]")
    else:
        assert actual == expected, f"{what}: {actual!r}, expected {expected!r}"


def check_names_without_named_parameters(rank, size):
    """Parameter groups only: every gradient still gets a unique name, the same on
    every rank, and training works."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 1))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(
            [
                {"params": model[0].parameters()},
                {"params": list(model[1].parameters()) + list(model[2].parameters()), "lr": 0.2},
            ],
            lr=0.1,
        )
    )
    names = list(optimizer._lockstep_reducer._names.values())
    assert len(names) == len(set(names)) == 6, f"names are not unique: {names}"
    everyone = hvd.allgather_object(names)
    assert all(other == names for other in everyone), f"names differ across ranks: {everyone}"
    before = [p.detach().clone() for p in model.parameters()]
    model(torch.ones(2, 3) * (rank + 1)).sum().backward()
    optimizer.step()
    assert any(not torch.equal(p, b) for p, b in zip(model.parameters(), before)), "the step changed nothing"
    assert_identical_across_ranks(hvd, list(model.parameters()), "unnamed parameters")


def check_optimizer_protocol(rank, size):
    """Horovod's misuse errors are AssertionErrors (lockstep's are also RuntimeErrors),
    and its deprecated num_groups argument still works, positionally too."""
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1),
            model.named_parameters(),
            hvd.Compression.none,
            1,
            hvd.Average,
            1.0,
            2,
        )
    assert any(issubclass(w.category, DeprecationWarning) and "num_groups" in str(w.message) for w in caught), caught
    assert len(optimizer._lockstep_reducer._groups) == 2, "num_groups=2 makes two groups"
    model(torch.ones(1, 3) * (rank + 1)).sum().backward()
    for catch in (AssertionError, RuntimeError):
        expect_error(catch, ["zero_grad"], optimizer.zero_grad)
    optimizer.step()
    assert_identical_across_ranks(hvd, list(model.parameters()), "num_groups")
    model(torch.ones(1, 3)).sum().backward()
    for catch in (AssertionError, RuntimeError):
        expect_error(catch, ["backward_passes_per_step"], lambda: model(torch.ones(1, 3)).sum().backward())
    optimizer.synchronize()
    if not size & (size - 1):
        adasum = hvd.DistributedOptimizer(torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1), op=hvd.Adasum)
        expect_error(AssertionError, ["skip_synchronize"], adasum.skip_synchronize)


def check_elastic_state_saves_copies(rank, size):
    # TorchState.save() clones tensors itself (faster than deepcopy's path): what it
    # saved must not move with the model, tied weights stay one copy, and restore()
    # comes back to it.
    torch.manual_seed(3)
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5))
    tied = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False))
    tied[1].weight = tied[0].weight
    optimizer = torch.optim.SGD([*model.parameters(), *tied.parameters()], lr=0.5, momentum=0.9)
    loss = model(torch.tensor([[1, 2]])).sum() + tied(torch.ones(1, 4)).sum()
    loss.backward()
    optimizer.step()
    state = hvd.elastic.TorchState(model=model, tied=tied, optimizer=optimizer, epoch=1)
    state.save()
    expected = copy.deepcopy({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    saved = state._handlers["tied"].saved
    assert saved["0.weight"].data_ptr() == saved["1.weight"].data_ptr(), "a tied weight was saved twice"
    assert saved["0.weight"].data_ptr() != tied[0].weight.data_ptr(), "the saved weight is the live one"
    with torch.no_grad():
        for parameter in [*model.parameters(), *tied.parameters()]:
            parameter.add_(1.0)
    optimizer.step()
    state.restore()
    for name, value in expected["model"].items():
        assert_tensor_equal(model.state_dict()[name], value, f"restored {name}")
    for index, buffers in expected["optimizer"]["state"].items():
        restored = optimizer.state_dict()["state"][index]["momentum_buffer"]
        assert_tensor_equal(restored, buffers["momentum_buffer"], f"restored momentum {index}")


def run(rank, size):
    check(check_elastic_state_saves_copies, rank, size)
    check(check_sparse_embeddings, rank, size)
    check(check_adasum_optimizer, rank, size)
    check("broadcast_optimizer_state", check_broadcast_optimizer_state_all, rank, size)
    check("unnamed_parameters", check_names_without_named_parameters, rank, size)
    check(check_optimizer_protocol, rank, size)
