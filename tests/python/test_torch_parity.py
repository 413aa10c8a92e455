"""Horovod parity for lockstep.torch (issue 15), on 2 and 3 ranks. Each check runs
in its own mpirun job: a failing check ends its job (its rank exits at once and
mpirun stops the others) and cannot hang or desynchronise the rest."""

import pytest
from mpi_harness import DESYNC_LIMIT, run_ranks

CHECKS = [
    "error_types",
    "scaling",
    "grouped_allgather",
    "grouped_reducescatter",
    "sparse_allreduce",
    "adasum_allreduce",
    "alltoall_splits",
    "join",
    "sparse_embeddings",
    "adasum_optimizer",
    "broadcast_optimizer_state",
    "unnamed_parameters",
    "optimizer_protocol",
]


@pytest.mark.parametrize("check", CHECKS)
def test_horovod_parity(check, num_ranks):
    run = run_ranks("torch_parity.py", num_ranks, timeout=180, args=[check], env=DESYNC_LIMIT)
    run.assert_all_ranks_passed(num_ranks)


def test_porting_gaps(num_ranks):
    """Issue 25's checks, in one job per rank count (they are quick; imports dominate)."""
    checks = [
        "alltoall_splits_type",
        "parameter_names",
        "double_synchronize_warning",
        "gradients_after_state_broadcast",
    ]
    run = run_ranks("torch_parity.py", num_ranks, timeout=180, args=checks, env=DESYNC_LIMIT)
    run.assert_all_ranks_passed(num_ranks)


def test_adasum_at_four_ranks(built_extension):
    """Four ranks run two levels of Adasum's halving, each with its own group for the
    dot products (two ranks run one, three refuse as Horovod does)."""
    run = run_ranks(
        "torch_parity.py",
        4,
        timeout=180,
        args=["adasum_levels", "adasum_allreduce", "adasum_optimizer"],
        env=DESYNC_LIMIT,
    )
    run.assert_all_ranks_passed(4)
