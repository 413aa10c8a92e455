"""Names and groups for DistributedOptimizer's gradient allreduces.

Ranks match allreduces by name, so every gradient needs a name that is unique
and the same on every rank; a stable name also lets the core's response cache
skip renegotiation after the first step.
"""

from collections import Counter

import torch

from lockstep.common import validation
from lockstep.common.buckets import plan_buckets


def resolve_named_parameters(param_groups, named_parameters):
    """(name, parameter) for every parameter of the optimizer, in param_groups order.

    Without named_parameters, names come from positions, as Horovod names them
    ("allreduce.noname.<group>.<index>"), which match across ranks as long as every
    rank builds the same optimizer.
    """
    in_optimizer = [
        (f"allreduce.noname.{g}.{i}", p) for g, group in enumerate(param_groups) for i, p in enumerate(group["params"])
    ]
    if named_parameters is None:
        return in_optimizer
    names = _names_by_parameter(named_parameters)
    unnamed = [f"{position} (shape {tuple(p.shape)})" for position, p in in_optimizer if p not in names]
    if unnamed:
        raise ValueError(
            "named_parameters was given but does not name every parameter of the optimizer; unnamed: "
            f"{', '.join(unnamed)}. Pass model.named_parameters() of the model whose parameters the optimizer holds"
        )
    return [(names[p], p) for _, p in in_optimizer]


def _names_by_parameter(named_parameters):
    if isinstance(named_parameters, (str, bytes)) or not hasattr(named_parameters, "__iter__"):
        raise TypeError(
            "named_parameters must be a sequence of (name, parameter) tuples such as model.named_parameters(), "
            f"got {type(named_parameters).__name__}"
        )
    pairs = list(named_parameters)
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], torch.Tensor)):
            raise ValueError(
                "named_parameters must be a sequence of (name, parameter) tuples such as "
                f"model.named_parameters(); found an entry {_describe(pair)}"
            )
        if not isinstance(pair[0], str) or not pair[0]:
            raise ValueError(f"parameter names must be non-empty strings, got {pair[0]!r}")
    duplicates = sorted(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
    if duplicates:
        raise ValueError(f"parameter names in named_parameters must be unique; duplicates: {', '.join(duplicates)}")
    names = {}
    for name, param in pairs:
        names.setdefault(param, name)  # a parameter listed twice (tied weights) keeps its first name
    return names


def resolve_groups(groups, named_parameters):
    """Lists of parameters to reduce together, from DistributedOptimizer's `groups`.

    None or 0: no groups. An int n: the parameters split, in order, into n groups of
    nearly equal count. A list of lists of parameters: those groups; parameters in
    no list are reduced alone.
    """
    params = [param for _, param in named_parameters]
    if groups is None:
        return []
    if isinstance(groups, (list, tuple)):
        return _explicit_groups(groups, params)
    count = validation.as_int(groups, "groups (None, a number of groups, or lists of parameters)")
    if count < 0:
        raise ValueError(f"groups must be non-negative, got {count}")
    if count == 0 or not params:
        return []
    count = min(count, len(params))
    size, extra = divmod(len(params), count)
    bounds = [index * size + min(index, extra) for index in range(count + 1)]
    return [params[bounds[index] : bounds[index + 1]] for index in range(count)]


def gradient_buckets(named_parameters, bucket_bytes):
    """Lists of parameters whose allreduces are submitted together (lockstep.common.buckets)."""
    params = [param for _, param in named_parameters]
    items = [((param.device, param.dtype), param.numel() * param.element_size()) for param in params]
    return [[params[index] for index in bucket] for bucket in plan_buckets(items, bucket_bytes)]


def _explicit_groups(groups, params):
    known = set(params)
    seen = set()
    resolved = []
    for index, group in enumerate(groups):
        if not isinstance(group, (list, tuple)):
            raise TypeError(f"groups[{index}] must be a list of parameters, got {type(group).__name__}")
        members = []
        for param in group:
            if not isinstance(param, torch.Tensor) or param not in known:
                raise ValueError(
                    f"groups[{index}] holds {_describe(param)}, which is not a trainable parameter of this optimizer"
                )
            if param in seen:
                raise ValueError(f"a parameter of shape {tuple(param.shape)} appears in more than one group")
            seen.add(param)
            members.append(param)
        if members:
            resolved.append(members)
    return resolved


def _describe(value):
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"of type {type(value).__name__}"
