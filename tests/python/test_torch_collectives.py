"""lockstep.torch: every collective and dtype, the collectives' gradients,
SyncBatchNorm, and user errors, on 2 and 3 ranks.

Each check module runs in its own mpirun job, so a module that fails (its rank
exits at once and mpirun ends the job) cannot hang or desynchronise the others.
"""

import pytest
from mpi_harness import DESYNC_LIMIT, run_ranks


@pytest.mark.parametrize("module", ["errors faults", "collectives", "autograd"])
def test_torch_collectives(module, num_ranks):
    run = run_ranks("torch_suite.py", num_ranks, timeout=240, args=module.split(), env=DESYNC_LIMIT)
    run.assert_all_ranks_passed(num_ranks)
