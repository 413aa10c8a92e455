"""MPI initialized by the user (mpi4py) before lockstep: lockstep adopts it, runs
collectives, and leaves MPI usable (not finalized) after its own shutdown. Each a
named check (scripts/checks.py)."""

import numpy as np
from checks import check
from mpi4py import MPI  # initializes MPI here, before lockstep
from rank_checks import assert_equal, rank_values, run_main

import lockstep.numpy as hvd


def main():
    world = MPI.COMM_WORLD
    assert MPI.Is_initialized(), "mpi4py initialized MPI"
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    check(check_lockstep_sees_comm_world, world, rank, size)
    check(check_collectives_under_mpi4py, rank, size)
    hvd.shutdown()
    check(check_mpi_usable_after_shutdown, world, rank, size)


def check_lockstep_sees_comm_world(world, rank, size):
    assert (rank, size) == (world.Get_rank(), world.Get_size()), "lockstep sees MPI_COMM_WORLD"


def check_collectives_under_mpi4py(rank, size):
    inputs = [rank_values(np.dtype(np.int32), (6,), r) for r in range(size)]
    assert_equal(
        hvd.allreduce(inputs[rank], op=hvd.Sum), np.sum(inputs, axis=0).astype(np.int32), "allreduce under mpi4py"
    )
    assert_equal(hvd.allgather(np.full(2, rank, np.int64)), np.repeat(np.arange(size), 2), "allgather under mpi4py")
    assert hvd.broadcast_object({"root": rank}, root_rank=size - 1) == {"root": size - 1}, "broadcast_object"


def check_mpi_usable_after_shutdown(world, rank, size):
    assert not MPI.Is_finalized(), "lockstep must not finalize MPI that the program initialized"
    assert world.allreduce(rank + 1) == size * (size + 1) // 2, "mpi4py still works after lockstep shutdown"


if __name__ == "__main__":
    run_main(main)
