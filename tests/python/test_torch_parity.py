"""Horovod parity for lockstep.torch (issue 15), on 2 and 3 ranks. All checks run in
one mpirun job per rank count (torch's start-up in every rank costs more than most
checks): a failing check ends its job at once (its rank exits and mpirun stops the
others), so it cannot hang or desynchronise the rest, and the output names it."""

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
# Issue 25's checks.
PORTING_CHECKS = [
    "alltoall_splits_type",
    "parameter_names",
    "double_synchronize_warning",
    "gradients_after_state_broadcast",
]


def test_horovod_parity_and_porting_gaps(num_ranks):
    checks = CHECKS + PORTING_CHECKS
    run = run_ranks("torch_parity.py", num_ranks, timeout=240, args=checks, env=DESYNC_LIMIT)
    run.assert_all_ranks_passed(num_ranks)
    for rank in range(num_ranks):
        for check in checks:
            assert f"rank {rank}: {check} passed" in run.stdout, run.describe()


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
