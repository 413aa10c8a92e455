"""Horovod 0.28.1 behaviour that ported scripts rely on, each checked by a script
written for Horovod with only the import changed, under mpirun at 2 and 3 ranks."""

import socket
import subprocess
import sys

import mpi_harness
import pytest
from mpi_harness import run_ranks

RUN_PY = mpi_harness.REPO_ROOT / "python" / "lockstep" / "launcher" / "cli.py"
SCRIPT = mpi_harness.SCRIPTS_DIR / "horovod_env.py"


def test_queries_answer_after_elastic_run_and_a_peer_shutdown(num_ranks):
    run = run_ranks("horovod_lifecycle.py", num_ranks, timeout=180)
    run.assert_all_ranks_passed(num_ranks)


def run_launcher(args, timeout, env):
    return subprocess.run(
        [sys.executable, str(RUN_PY), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=mpi_harness.child_environment(env),
    )


def test_worker_environment_under_plain_mpirun(num_ranks):
    # No host list: HOROVOD_HOSTNAME is the machine's name; a variable the user set stays.
    hosts = ",".join([socket.gethostname()] * num_ranks)
    env = {"LOCKSTEP_TEST_HOSTS": hosts, "HOROVOD_CROSS_SIZE": "7", "LOCKSTEP_TEST_USER_SET": "HOROVOD_CROSS_SIZE=7"}
    run_ranks("horovod_env.py", num_ranks, timeout=180, env=env).assert_all_ranks_passed(num_ranks)


def test_worker_environment_under_lockstep_run(num_ranks):
    # horovodrun without -H runs on "localhost", and so names the host.
    env = {"LOCKSTEP_TEST_HOSTS": ",".join(["localhost"] * num_ranks)}
    run = run_launcher(["-np", str(num_ranks), sys.executable, str(SCRIPT)], timeout=180, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in range(num_ranks):
        assert f"rank {rank}: ALL CHECKS PASSED" in run.stdout, run.stdout + run.stderr
        assert f"rank {rank}: after init(): HOROVOD_RANK={rank} HOROVOD_SIZE={num_ranks} " in run.stdout


def test_worker_environment_in_an_elastic_job(tmp_path, num_ranks):
    env = {
        "LOCKSTEP_TEST_HOSTS": ",".join(["localhost"] * num_ranks),
        "LOCKSTEP_TEST_ELASTIC": "1",
        "LOCKSTEP_ELASTIC_COMMIT_DIR": str(tmp_path),
    }
    args = ["-np", str(num_ranks), "--host-discovery-script", f"echo localhost:{num_ranks}"]
    run = run_launcher(args + ["--mpi-args=--oversubscribe", sys.executable, str(SCRIPT)], timeout=240, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in range(num_ranks):
        assert f"rank {rank}: ALL CHECKS PASSED" in run.stdout, run.stdout + run.stderr


def test_tensorflow_process_set_training_on_a_rank_outside_the_set(num_ranks):
    run = run_ranks("horovod_process_sets_tf.py", num_ranks, timeout=240)
    run.assert_all_ranks_passed(num_ranks)


def test_tensorflow_local_gradients_of_model_parallel_layers(num_ranks):
    run = run_ranks("horovod_tf_local_gradients.py", num_ranks, timeout=240)
    run.assert_all_ranks_passed(num_ranks)


def test_keras2_scripts_through_tf_keras(num_ranks):
    run = run_ranks("horovod_keras2.py", num_ranks, timeout=300, env={"TF_USE_LEGACY_KERAS": "1"})
    run.assert_all_ranks_passed(num_ranks)


def test_keras3_local_variables_aggregation_and_elastic_state(num_ranks):
    run = run_ranks("horovod_keras2.py", num_ranks, timeout=300, args=["keras3"])
    run.assert_all_ranks_passed(num_ranks)


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_keras3_register_local_var_on_every_backend(backend, built_extension):
    run = run_ranks("keras3_local_vars.py", 3, timeout=240, env={"KERAS_BACKEND": backend})
    run.assert_all_ranks_passed(3)
