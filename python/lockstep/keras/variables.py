"""Broadcasting Keras variables from one rank, for every backend.

Values travel as raw bytes through lockstep.common.host_ops, so any variable dtype works
(Keras keeps e.g. uint32 seed-generator states, which the core cannot reduce but
can copy byte for byte).
"""

import numpy as np

from lockstep.common import host_ops, validation
from lockstep.common.process import NAMER
from lockstep.keras.keras_line import to_numpy


def broadcast_variables(variables, root_rank, name=None):
    """Assign root_rank's value to each variable on every rank; all broadcasts are
    in flight together. Ranks must pass the same variables in the same order."""
    variables = list(variables)
    root_rank = validation.check_root_rank(root_rank)
    base = NAMER.name_for("keras.broadcast_variables", validation.check_name(name))
    _check_same_count(len(variables), base)
    values = [np.array(to_numpy(variable), order="C") for variable in variables]
    handles = [
        host_ops.broadcast_async(value.reshape(-1).view(np.uint8), root_rank, _member_name(base, index))
        for index, value in enumerate(values)
    ]
    for variable, value, raw in zip(variables, values, _synchronize_all(handles)):
        variable.assign(raw.view(value.dtype).reshape(value.shape))


def _check_same_count(count, base):
    """Fail on every rank, instead of waiting forever, when ranks pass different
    numbers of variables (e.g. different models)."""
    counts = host_ops.allgather(np.array([count], np.int64), name=f"{base}.count")
    if np.any(counts != count):
        raise ValueError(
            f"broadcast_variables: ranks passed different numbers of variables {counts.tolist()} "
            "(rank order); every rank needs the same model and optimizer"
        )


def _member_name(base, index):
    # Not the variable's path: Keras numbers layer names per process, so paths
    # can differ across ranks (e.g. when only rank 0 loaded a checkpoint).
    return f"{base}.{index}"


def _synchronize_all(handles):
    """Wait on every handle even after a failure, then raise the first error."""
    results, first_error = [], None
    for handle in handles:
        try:
            results.append(host_ops.synchronize(handle))
        except Exception as error:  # noqa: BLE001 - re-raised below, after the rest
            first_error = first_error or error
    if first_error is not None:
        raise first_error
    return results
