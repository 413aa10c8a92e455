"""lockstep.torch: every collective and dtype, the collectives' gradients,
SyncBatchNorm, and user errors, on 2 and 3 ranks.

The checks share one mpirun job per rank count: starting torch on every rank
costs more than all the checks together.
"""

from mpi_harness import run_ranks


def test_errors_collectives_gradients_and_sync_batch_norm(num_ranks):
    run = run_ranks("torch_suite.py", num_ranks, timeout=240, args=["errors", "collectives", "autograd"])
    run.assert_all_ranks_passed(num_ranks)
