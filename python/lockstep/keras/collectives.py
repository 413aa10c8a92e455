"""Collectives on plain values (numbers, numpy arrays, backend tensors) for use
outside the compiled train step: in callbacks, evaluation and scripts.

Values go through the host (lockstep.common.host_ops) and come back as backend tensors.
Inside a compiled step, let DistributedOptimizer do the communication.
"""

import numpy as np

from lockstep.common import host_ops
from lockstep.common.ops import handle_average_backwards_compatibility
from lockstep.keras.keras_line import to_numpy, to_tensor


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None):
    """Reduce `value` over ranks (Average by default)."""
    op = handle_average_backwards_compatibility(op, average)
    reduced = host_ops.allreduce(
        _host(value), name=name, op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor
    )
    return to_tensor(reduced)


def allgather(value, name=None):
    """Concatenate every rank's `value` along the first dimension."""
    return to_tensor(host_ops.allgather(_host(value), name=name))


def broadcast(value, root_rank, name=None):
    """root_rank's `value`, on every rank."""
    return to_tensor(host_ops.broadcast(_host(value), root_rank, name=name))


def _host(value):
    return np.array(to_numpy(value), order="C")
