"""Every collective x every dtype x every reduce op, run on 2 and 3 ranks."""

from mpi_harness import run_ranks


SHM_ACTIVE = "go through shared memory"


def test_allreduce_and_grouped_allreduce(num_ranks):
    # Debug logging says which allreduce path the large tensors took: shared memory
    # from 3 ranks of one host on, MPI below that.
    run = run_ranks("allreduce_all.py", num_ranks, env={"LOCKSTEP_LOG_LEVEL": "debug"})
    run.assert_all_ranks_passed(num_ranks)
    assert (SHM_ACTIVE in run.stderr) == (num_ranks >= 3), run.describe()


def test_allreduce_with_shared_memory_switched_off():
    env = {"LOCKSTEP_LOG_LEVEL": "debug", "LOCKSTEP_SHM_ALLREDUCE": "0"}
    run = run_ranks("allreduce_all.py", 3, env=env)
    run.assert_all_ranks_passed(3)
    assert SHM_ACTIVE not in run.stderr, run.describe()


def test_allgather_broadcast_alltoall_reducescatter_objects(num_ranks, tmp_path):
    run = run_ranks("data_movement.py", num_ranks, env={"LOCKSTEP_TEST_TMP": str(tmp_path)})
    run.assert_all_ranks_passed(num_ranks)


def test_join_with_uneven_work(num_ranks):
    run_ranks("join_ranks.py", num_ranks).assert_all_ranks_passed(num_ranks)
