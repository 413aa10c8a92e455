"""lockstep inside a program that initialized MPI itself through mpi4py."""

import pytest
from mpi_harness import run_ranks


@pytest.mark.rank_checks("mpi4py_init.py")
def test_init_after_mpi4py(num_ranks, rank_check):
    rank_check.run(num_ranks)


def test_exit_without_shutdown_after_mpi4py(num_ranks):
    run = run_ranks("mpi4py_exit_without_shutdown.py", num_ranks, timeout=60)
    run.assert_all_ranks_passed(num_ranks)
    assert "Segmentation fault" not in run.stderr and "not defined" not in run.stderr, run.describe()
