"""ResNet-50's gradients as buffers, and one synchronous gradient step per strategy.

Each `*_step` function builds the buffers it needs once and returns a callable
that allreduces the whole set (Sum) and returns when every tensor is done. The
gradient step and the memory benchmarks share them.
"""

import numpy as np
from mpi4py import MPI
from resnet50_shapes import gradient_order


def numpy_gradients(fill=1.0):
    """[(name, array)] in the order backward() produces them."""
    return [(f"grad.{name}", np.full(shape, fill, np.float32)) for name, shape in gradient_order()]


def torch_gradients():
    """Like numpy_gradients, as torch tensors of zeros (reduced in place, so Sum stays 0)."""
    import torch

    return [(f"grad.{name}", torch.zeros(shape, dtype=torch.float32)) for name, shape in gradient_order()]


def lockstep_numpy_step(gradients, prefix="numpy"):
    """Every gradient submitted asynchronously under a stable name, then all awaited."""
    import lockstep.numpy as ls

    def step():
        handles = [ls.allreduce_async(array, name=f"{prefix}.{name}", op=ls.Sum) for name, array in gradients]
        return [ls.synchronize(handle) for handle in handles]

    return step


def lockstep_numpy_in_place_step(gradients, prefix="numpy.in_place"):
    """Like lockstep_numpy_step, but each array receives its own result (allreduce_async_)."""
    import lockstep.numpy as ls

    return _in_place_step(ls, gradients, prefix)


def lockstep_torch_step(gradients, prefix="torch"):
    """In place, the way DistributedOptimizer reduces gradients."""
    import lockstep.torch as ls

    return _in_place_step(ls, gradients, prefix)


def _in_place_step(frontend, gradients, prefix):
    def step():
        handles = [
            frontend.allreduce_async_(tensor, name=f"{prefix}.{name}", op=frontend.Sum) for name, tensor in gradients
        ]
        for handle in handles:
            frontend.synchronize(handle)

    return step


def mpi_blocking_step(comm, gradients):
    """One blocking MPI_Allreduce per tensor, into preallocated outputs."""
    pairs = [(array, np.empty_like(array)) for _, array in gradients]

    def step():
        for array, received in pairs:
            comm.Allreduce(array, received, op=MPI.SUM)

    return step


def mpi_nonblocking_step(comm, gradients):
    """One MPI_Iallreduce per tensor, all posted, then MPI_Waitall."""
    pairs = [(array, np.empty_like(array)) for _, array in gradients]

    def step():
        requests = [comm.Iallreduce(array, received, op=MPI.SUM) for array, received in pairs]
        MPI.Request.Waitall(requests)

    return step


def mpi_concatenated_step(comm, gradients):
    """One MPI_Allreduce over a buffer that already holds all gradients back to back
    (the packing cost is left out: this is the best case of full fusion)."""
    total = sum(array.size for _, array in gradients)
    packed = np.ones(total, np.float32)
    received = np.empty_like(packed)

    def step():
        comm.Allreduce(packed, received, op=MPI.SUM)

    return step


def gloo_step(torch_gradients_list):
    """torch.distributed gloo, one async all_reduce per tensor, then wait on all."""
    import torch.distributed as dist

    tensors = [tensor for _, tensor in torch_gradients_list]

    def step():
        works = [dist.all_reduce(tensor, async_op=True) for tensor in tensors]
        for work in works:
            work.wait()

    return step


def total_bytes(gradients):
    return sum(array.nbytes for _, array in gradients)  # numpy arrays and torch tensors alike
