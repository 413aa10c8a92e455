"""broadcast_object / allgather_object for lockstep.torch.

The shared pickling logic lives in lockstep.common.objects; this module only
lends it torch's byte collectives (numpy arrays in, numpy arrays out).
"""

import torch

from lockstep.common import basics
from lockstep.common.objects import ObjectCollectives
from lockstep.common.process import DISPATCHER, NAMER
from lockstep.common.process_sets import global_process_set
from lockstep.torch import mpi_ops


def _as_tensor(array):
    # torch.from_numpy warns on read-only arrays (pickled bytes are read-only).
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def _broadcast_bytes(array, root_rank, name, process_set):
    return DISPATCHER.run_now(mpi_ops.broadcast_async, _as_tensor(array), root_rank, name, process_set).numpy()


def _allgather_bytes(array, name, process_set):
    return DISPATCHER.run_now(mpi_ops.allgather_async, _as_tensor(array), name, process_set).numpy()


_OBJECTS = ObjectCollectives(_broadcast_bytes, _allgather_bytes, NAMER, basics.rank)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Return root_rank's picklable `obj` on every rank (of the set)."""
    return _OBJECTS.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Return the list of every rank's (of the set) picklable `obj`, in rank order."""
    return _OBJECTS.allgather_object(obj, name, process_set)
