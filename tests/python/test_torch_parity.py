"""Horovod parity for lockstep.torch (issue 15), on 2 and 3 ranks, and Adasum on 4.
Each check is a test (scripts/checks.py); all of a test's checks run in one mpirun
job per rank count (torch's start-up in every rank costs more than most checks). A
check that fails on one rank goes on to the next, and the others' collectives fail
after DESYNC_LIMIT instead of hanging; the test names the check and its ranks."""

import pytest
from mpi_harness import DESYNC_LIMIT

# Issue 15's checks and issue 25's (torch_parity_porting.py).
SOURCES = ("torch_parity.py", "torch_parity_collectives.py", "torch_parity_training.py", "torch_parity_porting.py")


@pytest.mark.rank_checks(*SOURCES, without=["adasum_levels"])  # 4, 8, ... ranks: test_adasum_at_four_ranks
def test_horovod_parity_and_porting_gaps(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=240, env=DESYNC_LIMIT)


@pytest.mark.rank_checks(*SOURCES, only=["adasum_levels", "adasum_allreduce", "adasum_optimizer"])
def test_adasum_at_four_ranks(rank_check):
    """Four ranks run two levels of Adasum's halving, each with its own group for the
    dot products (two ranks run one, three refuse as Horovod does)."""
    rank_check.run(4, timeout=180, env=DESYNC_LIMIT)
