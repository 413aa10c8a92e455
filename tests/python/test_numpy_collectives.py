"""Every collective x every dtype x every reduce op, run on 2 and 3 ranks."""

from mpi_harness import run_ranks


def test_allreduce_and_grouped_allreduce(num_ranks):
    run_ranks("allreduce_all.py", num_ranks).assert_all_ranks_passed(num_ranks)


def test_allgather_broadcast_alltoall_reducescatter_objects(num_ranks, tmp_path):
    run = run_ranks("data_movement.py", num_ranks, env={"LOCKSTEP_TEST_TMP": str(tmp_path)})
    run.assert_all_ranks_passed(num_ranks)


def test_join_with_uneven_work(num_ranks):
    run_ranks("join_ranks.py", num_ranks).assert_all_ranks_passed(num_ranks)
