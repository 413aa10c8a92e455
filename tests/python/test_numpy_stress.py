"""Many concurrent async tensors in per-rank random order."""

from mpi_harness import run_ranks


def test_thousand_async_tensors_in_random_order(num_ranks):
    run = run_ranks("stress.py", num_ranks, timeout=240)
    run.assert_all_ranks_passed(num_ranks)
