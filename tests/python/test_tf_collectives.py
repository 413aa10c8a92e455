"""lockstep.tensorflow under mpirun: collectives on every dtype eagerly and in
tf.function, gradients, fusion of independent collectives in one graph,
DistributedGradientTape, variable broadcasts, TF1 sessions and errors."""

from mpi_harness import run_ranks


def test_tensorflow_frontend(num_ranks):
    run = run_ranks("tf_ranks.py", num_ranks, timeout=240)
    run.assert_all_ranks_passed(num_ranks)
    assert "of independent allreduces in one tf.function were fused" in run.stdout, run.describe()


def test_regrouped_tensor_names_complete():
    """A group whose name returns with some members in the response cache and
    some not must still complete (it once hung: the cached members bypassed the
    coordinator, which waited for all of them). The stall settings turn a hang
    into a quick failure."""
    run = run_ranks("tf_regroup.py", 2, timeout=90,
                    env={"LOCKSTEP_STALL_CHECK_TIME_SECONDS": "2", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "5"})
    run.assert_all_ranks_passed(2)
