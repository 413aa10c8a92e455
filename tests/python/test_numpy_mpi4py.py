"""lockstep inside a program that initialized MPI itself through mpi4py."""

from mpi_harness import run_ranks


def test_init_after_mpi4py(num_ranks):
    run_ranks("mpi4py_init.py", num_ranks).assert_all_ranks_passed(num_ranks)


def test_exit_without_shutdown_after_mpi4py(num_ranks):
    run = run_ranks("mpi4py_exit_without_shutdown.py", num_ranks, timeout=60)
    run.assert_all_ranks_passed(num_ranks)
    assert "Segmentation fault" not in run.stderr and "not defined" not in run.stderr, run.describe()
