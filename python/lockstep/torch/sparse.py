"""Allreduce of sparse COO tensors, as Horovod does it: every rank's indices and
values are allgathered (two allgathers, named <name>.indices and <name>.values),
and the result is the sparse tensor holding all of them. Duplicate indices are
left uncoalesced, so they are summed wherever the tensor is used (or coalesced);
Average divides the values by the number of ranks.
"""

import torch

from lockstep.common.ops import Average, check_linear_op
from lockstep.common.process import DISPATCHER, NAMER
from lockstep.common.process_sets import global_process_set, process_set_id, process_set_size
from lockstep.common.validation import check_name
from lockstep.torch import mpi_ops


class SparseHandle(int):
    """What sparse_allreduce_async returns: an ordinary handle (one pending op made of
    the two allgathers) for poll() and synchronize(), and callable, as Horovod's
    callers call theirs (a function there). Calling it again returns the same result."""

    def __call__(self):
        if not hasattr(self, "_result"):
            self._result = DISPATCHER.synchronize(self)
        return self._result


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set):
    """Start reducing a sparse COO tensor across ranks (Sum or Average); returns a
    SparseHandle. Ranks may hold different numbers of non-zero entries."""
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise ValueError("sparse_allreduce_async needs a sparse COO tensor; use allreduce_async for dense tensors")
    op = check_linear_op(op, "sparse_allreduce_async")
    set_id = process_set_id(process_set)
    name = NAMER.name_for("sparse_allreduce", check_name(name), set_id)
    indices = mpi_ops.allgather_async(
        tensor._indices().t().contiguous(), name=f"{name}.indices", process_set=process_set
    )
    values = mpi_ops.allgather_async(tensor._values().contiguous(), name=f"{name}.values", process_set=process_set)
    divisor = process_set_size(set_id) if op == Average else 1
    size, dtype = tensor.size(), tensor.dtype

    def finish(gathered):
        gathered_indices, gathered_values = gathered
        if divisor != 1:
            gathered_values = gathered_values / divisor
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, size, dtype=dtype)

    return SparseHandle(DISPATCHER.combine([indices, values], finish))
