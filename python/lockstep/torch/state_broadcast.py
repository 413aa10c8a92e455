"""Make every rank start from the root's model parameters and optimizer state.

broadcast_parameters overwrites tensors in place. broadcast_optimizer_state sends
the root's whole optimizer state_dict: its structure and scalar options (lr,
momentum, betas, ...) as one pickled object, its tensors with tensor broadcasts.
Sending the root's structure, rather than matching each rank's own, is what makes
state that optimizers create lazily on their first step (Adam's moments) arrive on
ranks that have not stepped yet, with no dummy step to create it. State on a GPU
arrives on each rank's current GPU (torch.cuda.set_device(hvd.local_rank())).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Tuple

import torch

from lockstep.common import basics, validation
from lockstep.common.process_sets import global_process_set
from lockstep.torch import mpi_ops
from lockstep.torch.objects import broadcast_object
from lockstep.torch.tensors import check_tensor, readable

_PARAMETERS_PREFIX = "broadcast_parameters"
_OPTIMIZER_PREFIX = "broadcast_optimizer_state"


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Overwrite every tensor in `params` with root_rank's values, in place.

    `params` is a state_dict (or any mapping of names to tensors), or an iterable
    of (name, tensor) pairs such as model.named_parameters(), or of tensors.
    With a process set, only its ranks take part; root_rank is a global rank.
    """
    root_rank = validation.check_root_rank(root_rank)
    named = _named_tensors(params)
    _broadcast_in_place([(f"{_PARAMETERS_PREFIX}.{name}", tensor) for name, tensor in named], root_rank, process_set)


def broadcast_optimizer_state(optimizer, root_rank, process_set=global_process_set):
    """Give every rank (of the set) root_rank's optimizer state: hyperparameters and buffers."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    root_rank = validation.check_root_rank(root_rank)
    is_root = basics.rank() == root_rank
    had_no_state = not optimizer.state
    if is_root:
        layout, tensors = _split_tensors(optimizer.state_dict())
    else:
        layout, tensors = None, []
    layout = broadcast_object(layout, root_rank, name=f"{_OPTIMIZER_PREFIX}.layout", process_set=process_set)
    if not is_root:
        slots = sorted(_slots(layout), key=lambda slot: slot.index)
        tensors = [torch.empty(slot.shape, dtype=slot.dtype, device=_local_device(slot.device_type)) for slot in slots]
    _broadcast_in_place(
        [(f"{_OPTIMIZER_PREFIX}.{index}", t) for index, t in enumerate(tensors)], root_rank, process_set
    )
    if not is_root:
        optimizer.load_state_dict(_fill_tensors(layout, tensors))
    if had_no_state:
        _zero_missing_gradients(optimizer)


def _zero_missing_gradients(optimizer):
    """Horovod gives a rank without optimizer state zero gradients on its trainable
    parameters (it takes a dummy step with them); scripts then find a .grad there.
    Parameters that do not require gradients keep none."""
    sparse = isinstance(optimizer, torch.optim.SparseAdam)
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.requires_grad and param.grad is None:
                grad = torch.zeros_like(param, memory_format=torch.preserve_format)
                param.grad = grad.to_sparse() if sparse else grad


@dataclass(frozen=True)
class _TensorSlot:
    """Stands in for a tensor of the state_dict while its structure is pickled."""

    index: int
    shape: Tuple[int, ...]
    dtype: Any
    # "cpu" or "cuda": each rank receives a CUDA tensor of the root's on its own GPU
    # (Adam's moments live on the GPU, its step count on the CPU).
    device_type: str = "cpu"


def _local_device(device_type):
    if device_type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _named_tensors(params):
    if isinstance(params, Mapping):
        pairs = sorted(params.items(), key=lambda item: str(item[0]))
    elif isinstance(params, torch.Tensor) or not hasattr(params, "__iter__"):
        raise TypeError(
            f"params must be a state_dict, an iterable of (name, tensor) pairs or of tensors, "
            f"got {type(params).__name__}"
        )
    else:
        pairs = [item if isinstance(item, tuple) else (str(index), item) for index, item in enumerate(params)]
    named = []
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f"each entry of params must be a (name, tensor) pair, got a tuple of {len(pair)}")
        name, tensor = pair
        named.append((str(name), check_tensor(tensor, f"parameter {name!r}")))
    _check_unique([name for name, _ in named])
    return named


def _check_unique(names):
    seen, duplicates = set(), []
    for name in names:
        if name in seen:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise ValueError(f"parameter names must be unique; duplicates: {', '.join(sorted(set(duplicates)))}")


def _broadcast_in_place(named_tensors, root_rank, process_set):
    # All submitted before any is awaited, so the core can fuse and overlap them.
    handles = [
        mpi_ops.broadcast_async_(tensor, root_rank, name=name, process_set=process_set)
        for name, tensor in named_tensors
    ]
    for handle in handles:
        mpi_ops.synchronize(handle)


def _split_tensors(structure):
    """(structure with tensors replaced by _TensorSlots, the tensors in slot order)."""
    tensors = []

    def visit(value):
        if isinstance(value, torch.Tensor):
            tensor = readable(check_tensor(value, "optimizer state tensor"))
            tensors.append(tensor)
            return _TensorSlot(len(tensors) - 1, tuple(tensor.shape), tensor.dtype, tensor.device.type)
        if isinstance(value, Mapping):
            return {key: visit(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(visit(item) for item in value)
        return value

    return visit(structure), tensors


def _slots(structure):
    if isinstance(structure, _TensorSlot):
        yield structure
    elif isinstance(structure, Mapping):
        for item in structure.values():
            yield from _slots(item)
    elif isinstance(structure, (list, tuple)):
        for item in structure:
            yield from _slots(item)


def _fill_tensors(structure, tensors):
    if isinstance(structure, _TensorSlot):
        return tensors[structure.index]
    if isinstance(structure, Mapping):
        return {key: _fill_tensors(item, tensors) for key, item in structure.items()}
    if isinstance(structure, (list, tuple)):
        return type(structure)(_fill_tensors(item, tensors) for item in structure)
    return structure
