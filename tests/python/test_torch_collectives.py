"""lockstep.torch: every collective and dtype, the collectives' gradients,
SyncBatchNorm, and user errors, on 2 and 3 ranks.

Each check is a test (scripts/checks.py); a check that fails on one rank goes on
to the next, and the others' collectives fail after DESYNC_LIMIT instead of
hanging. The collectives and their gradients share a job, since torch's start-up
costs more than either; the error and fault checks, which leave failed
collectives behind, have their own.
"""

import pytest
from mpi_harness import DESYNC_LIMIT


@pytest.mark.rank_checks("torch_suite.py", "torch_errors.py", "torch_faults.py")
def test_torch_errors_and_faults(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=240, args=["errors", "faults"], env=DESYNC_LIMIT)


@pytest.mark.rank_checks("torch_suite.py", "torch_collectives.py", "torch_autograd.py")
def test_torch_collectives_and_autograd(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=240, args=["collectives", "autograd"], env=DESYNC_LIMIT)
