"""lockstep.torch: every collective and dtype, the collectives' gradients,
SyncBatchNorm, and user errors, on 2 and 3 ranks.

A module that fails ends its job at once (its rank exits and mpirun stops the
others), so it cannot hang or desynchronise the rest of the job. The collectives
and their gradients share a job, since torch's start-up costs more than either; the
error and fault checks, which leave failed collectives behind, have their own.
"""

import pytest
from mpi_harness import DESYNC_LIMIT, run_ranks


@pytest.mark.parametrize("module", ["errors faults", "collectives autograd"])
def test_torch_collectives(module, num_ranks):
    run = run_ranks("torch_suite.py", num_ranks, timeout=240, args=module.split(), env=DESYNC_LIMIT)
    run.assert_all_ranks_passed(num_ranks)
