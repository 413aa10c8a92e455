"""lockstep.jax on a GPU (make gpu-test): jitted collectives through the CUDA FFI
handler and eager ones through the same custom call, at 1 rank and at 2 ranks sharing
the machine's GPU (gpu_harness gives each rank its own NCCL_HOSTID; NCCL talks over
loopback). Every test skips, with the reason, where JAX has no CUDA device or lockstep
has no GPU collectives.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax_gpu_harness  # noqa: E402

_REASON = jax_gpu_harness.unavailable_reason()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)
try:
    from gpu_harness import run_gpu_ranks  # noqa: E402
except ImportError:
    pytest.skip("tests/gpu/gpu_harness.py (the GPU suite's mpirun harness) is missing", allow_module_level=True)

# A collective some rank never submits fails on the others after this long instead of
# waiting for the job's timeout; a stuck NCCL collective is aborted after this long.
QUICK_FAILURE = {"LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "60", "LOCKSTEP_NCCL_TIMEOUT_SECONDS": "60"}
ENV = dict(QUICK_FAILURE, **jax_gpu_harness.JAX_RANK_ENV)


@pytest.mark.parametrize("ranks", [1, 2], ids=lambda n: f"np{n}")
def test_jax_collectives_on_the_gpu(ranks):
    run = run_gpu_ranks("gpu_jax_collectives.py", ranks, timeout=540, env=ENV)
    run.assert_all_ranks_passed(ranks)
    for rank in range(ranks):
        assert f"rank {rank}: check_stream_ordering passed" in run.stdout, run.describe()


def test_jax_collectives_with_mpi_staging():
    run = run_gpu_ranks("gpu_jax_collectives.py", 2, timeout=540, env=dict(ENV, LOCKSTEP_GPU_OPERATIONS="mpi"))
    run.assert_all_ranks_passed(2)


@pytest.mark.parametrize("ranks", [1, 2], ids=lambda n: f"np{n}")
def test_optax_training_on_the_gpu(ranks):
    run = run_gpu_ranks("gpu_jax_training.py", ranks, timeout=420, env=ENV)
    run.assert_all_ranks_passed(ranks)
    for rank in range(ranks):
        assert f"rank {rank}: the gradient pytree of a jitted step is one custom call" in run.stdout, run.describe()


def test_jax_errors_on_the_gpu_fail_every_rank():
    run = run_gpu_ranks("gpu_jax_errors.py", 2, timeout=300, env=ENV)
    run.assert_all_ranks_passed(2)
    for rank in range(2):
        assert f"rank {rank}: mismatch inside jit raised" in run.stdout, run.describe()
