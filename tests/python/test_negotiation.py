"""Negotiation's settings that must agree across ranks."""

import pytest
from mpi_harness import run_ranks


@pytest.mark.parametrize("num_ranks", [2, 3])
def test_different_cache_capacities_are_refused_on_every_rank(num_ranks):
    run = run_ranks("cache_capacity_mismatch.py", num_ranks, timeout=60)
    run.assert_all_ranks_passed(num_ranks)
