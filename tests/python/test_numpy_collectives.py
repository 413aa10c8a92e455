"""Every collective x every dtype x every reduce op, run on 2 and 3 ranks."""

import pytest
from mpi_harness import run_ranks

SHM_ACTIVE = "go through shared memory"


@pytest.mark.rank_checks("allreduce_all.py")
def test_allreduce_and_grouped_allreduce(num_ranks, rank_check):
    # Debug logging says which allreduce path the tensors took: shared memory whenever
    # all ranks share one host.
    run = rank_check.run(num_ranks, env={"LOCKSTEP_LOG_LEVEL": "debug"})
    assert SHM_ACTIVE in run.stderr, run.describe()


@pytest.mark.parametrize(
    "ranks, settings, shm_expected",
    [
        (3, {"LOCKSTEP_SHM_ALLREDUCE": "off"}, False),
        (2, {"LOCKSTEP_SHM_ALLREDUCE": "off"}, False),
        (3, {"LOCKSTEP_CHUNK_BYTES": "262144"}, True),  # smaller slots, more chunks per tensor
        (2, {"LOCKSTEP_CHUNK_BYTES": "0"}, False),  # pieces larger than any slot: MPI
        (2, {"LOCKSTEP_HOST_BUFFER_CACHE_BYTES": "0"}, True),  # no recycled results
    ],
    ids=["3-ranks-off", "2-ranks-off", "3-ranks-256KiB-chunks", "2-ranks-unchunked", "2-ranks-no-buffer-cache"],
)
@pytest.mark.rank_checks("allreduce_all.py")
def test_allreduce_under_shared_memory_settings(ranks, settings, shm_expected, rank_check):
    run = rank_check.run(ranks, env={"LOCKSTEP_LOG_LEVEL": "debug", **settings})
    assert (SHM_ACTIVE in run.stderr) == shm_expected, run.describe()


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_shared_memory_allreduce_sums_in_rank_order(ranks):
    # float32 sums bit for bit against ((x0 + x1) + x2) ..., on both sides of the
    # one-pass limit and across chunks, in place and not.
    run = run_ranks("shm_rank_order.py", ranks, env={"LOCKSTEP_LOG_LEVEL": "debug"})
    run.assert_all_ranks_passed(ranks)
    assert SHM_ACTIVE in run.stderr, run.describe()


@pytest.mark.rank_checks("data_movement.py")
def test_allgather_broadcast_alltoall_reducescatter_objects(num_ranks, rank_check):
    rank_check.run(num_ranks, env={"LOCKSTEP_TEST_TMP": str(rank_check.tmp_path)})


def test_join_with_uneven_work(num_ranks):
    run_ranks("join_ranks.py", num_ranks).assert_all_ranks_passed(num_ranks)


def test_repeated_unnamed_ops_hit_the_response_cache(num_ranks):
    run_ranks("auto_name_cache.py", num_ranks).assert_all_ranks_passed(num_ranks)


@pytest.mark.parametrize(
    "ranks, shm",
    [(2, "off"), (2, "on"), (3, "off"), (3, "auto")],
    ids=["np2-mpi", "np2-shm", "np3-mpi", "np3-shm"],
)
def test_small_integer_sums_wrap_on_every_path(ranks, shm):
    # Open MPI's AVX op (4.1.4 and 5.0.11) saturates 8- and 16-bit sums of 16+ elements; lockstep wraps
    # everywhere, as torch, NCCL and its own shared-memory kernels do.
    run = run_ranks("small_int_wrap.py", ranks, env={"LOCKSTEP_LOG_LEVEL": "debug", "LOCKSTEP_SHM_ALLREDUCE": shm})
    run.assert_all_ranks_passed(ranks)
    assert (SHM_ACTIVE in run.stderr) == (shm != "off"), run.describe()


@pytest.mark.parametrize(
    "ranks, caller_cycles", [(2, "1"), (3, "1"), (2, "0")], ids=["np2", "np3", "np2-background-thread-only"]
)
def test_synchronous_ops_from_several_threads(ranks, caller_cycles):
    # A waiting caller runs the cycles itself (flat combining); the others wait on it.
    run = run_ranks("threads_sync_ops.py", ranks, env={"LOCKSTEP_CALLER_CYCLES": caller_cycles})
    run.assert_all_ranks_passed(ranks)


@pytest.mark.parametrize("frontend", ["numpy", "torch"])
@pytest.mark.parametrize("ranks", [2, 3], ids=["np2", "np3"])
def test_synchronous_collectives_do_not_wake_the_background_thread(frontend, ranks):
    # broadcast, allgather, alltoall, reducescatter, grouped allreduce and barrier run
    # their cycle on the caller, as allreduce does. The long cycle time keeps the
    # background thread's own idle cycles few (the script allows for them).
    run = run_ranks("sync_ops_no_wakeups.py", ranks, env={"LOCKSTEP_CYCLE_TIME": "500"}, args=(frontend,))
    run.assert_all_ranks_passed(ranks)
