"""Allreduce of sparse COO tensors, as Horovod does it: every rank's indices and
values are allgathered (two allgathers, named <name>.indices and <name>.values),
and the result is the sparse tensor holding all of them. Duplicate indices are
left uncoalesced, so they are summed wherever the tensor is used (or coalesced);
Average divides the values by the number of ranks.
"""

import torch

from lockstep.common.ops import Average, Sum, to_core_reduce_op
from lockstep.common.process import NAMER
from lockstep.common.process_sets import global_process_set, process_set_id, process_set_size
from lockstep.common.validation import check_name
from lockstep.torch import mpi_ops


class SparseHandle:
    """What sparse_allreduce_async returns. Call it (as Horovod's callers do) or pass
    it to synchronize() to wait for the result; poll() works too."""

    def __init__(self, tensor, indices_handle, values_handle, op, set_size):
        self._set_size = set_size
        self._tensor = tensor
        self._indices_handle = indices_handle
        self._values_handle = values_handle
        self._op = op
        self._result = None

    def poll(self):
        if self._result is not None:
            return True
        return mpi_ops.poll(self._indices_handle) and mpi_ops.poll(self._values_handle)

    def __call__(self):
        if self._result is None:
            self._result = self._finish()
        return self._result

    def _finish(self):
        try:
            values = mpi_ops.synchronize(self._values_handle)
        finally:
            indices = mpi_ops.synchronize(self._indices_handle)  # released even if values failed
        if self._op == Average:
            values = values / self._set_size
        return torch.sparse_coo_tensor(indices.t(), values, self._tensor.size(), dtype=self._tensor.dtype)


def sparse_allreduce_async(tensor, name=None, op=Average, process_set=global_process_set):
    """Start reducing a sparse COO tensor across ranks (Sum or Average); returns a
    SparseHandle. Ranks may hold different numbers of non-zero entries."""
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise ValueError("sparse_allreduce_async needs a sparse COO tensor; use allreduce_async for dense tensors")
    op = int(to_core_reduce_op(op, (Average, Sum), "sparse_allreduce_async"))
    set_id = process_set_id(process_set)
    name = NAMER.name_for("sparse_allreduce", check_name(name), set_id)
    indices = mpi_ops.allgather_async(tensor._indices().t().contiguous(), name=f"{name}.indices",
                                      process_set=process_set)
    values = mpi_ops.allgather_async(tensor._values().contiguous(), name=f"{name}.values", process_set=process_set)
    return SparseHandle(tensor, indices, values, op, process_set_size(set_id))
