"""Horovod 0.28.1 behaviour that ported scripts rely on, each checked by a script
written for Horovod with only the import changed, under mpirun at 2 and 3 ranks. Each
check of a script is a test (scripts/checks.py), one launch for all of a test's checks."""

import socket
import sys

import mpi_harness
import pytest
from mpi_harness import run_ranks

RUN_PY = mpi_harness.REPO_ROOT / "python" / "lockstep" / "launcher" / "cli.py"
SCRIPT = mpi_harness.SCRIPTS_DIR / "horovod_env.py"


@pytest.mark.rank_checks("horovod_lifecycle.py")
def test_queries_answer_after_elastic_run_and_a_peer_shutdown(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=180)


def run_launcher(args, timeout, env):
    """lockstep-run with `args`, as an mpi_harness.MpiRun."""
    command = [sys.executable, str(RUN_PY), *args]
    return mpi_harness.run_mpirun(command, mpi_harness.child_environment(env), timeout)


@pytest.mark.rank_checks("horovod_env.py")
def test_worker_environment_under_plain_mpirun(num_ranks, rank_check):
    # No host list: HOROVOD_HOSTNAME is the machine's name; a variable the user set stays.
    hosts = ",".join([socket.gethostname()] * num_ranks)
    env = {"LOCKSTEP_TEST_HOSTS": hosts, "HOROVOD_CROSS_SIZE": "7", "LOCKSTEP_TEST_USER_SET": "HOROVOD_CROSS_SIZE=7"}
    rank_check.run(num_ranks, timeout=180, env=env)


@pytest.mark.rank_checks("horovod_env.py")
def test_worker_environment_under_lockstep_run(num_ranks, rank_check):
    # horovodrun without -H runs on "localhost", and so names the host.
    env = {"LOCKSTEP_TEST_HOSTS": ",".join(["localhost"] * num_ranks)}
    run = rank_check.run_by(num_ranks, run_launcher, ["-np", str(num_ranks), sys.executable, str(SCRIPT)], 180, env=env)
    if rank_check.name == "environment_after_init":
        for rank in range(num_ranks):
            assert f"rank {rank}: after init(): HOROVOD_RANK={rank} HOROVOD_SIZE={num_ranks} " in run.stdout


@pytest.mark.rank_checks("horovod_env.py")
def test_worker_environment_in_an_elastic_job(num_ranks, rank_check):
    env = {
        "LOCKSTEP_TEST_HOSTS": ",".join(["localhost"] * num_ranks),
        "LOCKSTEP_TEST_ELASTIC": "1",
        "LOCKSTEP_ELASTIC_COMMIT_DIR": str(rank_check.tmp_path),
    }
    args = ["-np", str(num_ranks), "--host-discovery-script", f"echo localhost:{num_ranks}"]
    args += ["--mpi-args=--oversubscribe", sys.executable, str(SCRIPT)]
    rank_check.run_by(num_ranks, run_launcher, args, 240, env=env)


@pytest.mark.rank_checks("horovod_process_sets_tf.py")
def test_tensorflow_process_set_training_on_a_rank_outside_the_set(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=240)


@pytest.mark.rank_checks("horovod_tf_local_gradients.py")
def test_tensorflow_local_gradients_of_model_parallel_layers(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=240)


@pytest.mark.rank_checks("horovod_keras2.py")
def test_keras2_scripts_through_tf_keras(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=300, env={"TF_USE_LEGACY_KERAS": "1"})


@pytest.mark.rank_checks("horovod_keras2.py")
def test_keras3_local_variables_aggregation_and_elastic_state(num_ranks, rank_check):
    rank_check.run(num_ranks, timeout=300, args=["keras3"])


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_keras3_register_local_var_on_every_backend(backend, built_extension):
    # One behaviour (register_local_var, with and without scaling): one check.
    run = run_ranks("keras3_local_vars.py", 3, timeout=240, env={"KERAS_BACKEND": backend})
    run.assert_all_ranks_passed(3)
