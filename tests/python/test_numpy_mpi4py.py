"""lockstep inside a program that initialized MPI itself through mpi4py."""

from mpi_harness import run_ranks


def test_init_after_mpi4py(num_ranks):
    run_ranks("mpi4py_init.py", num_ranks).assert_all_ranks_passed(num_ranks)
