"""The parts of lockstep.jax's GPU route that run without a GPU: the FFI library has
the CUDA handler exactly in builds with the GPU backend, only GPU arrays leave the host
path eagerly, eager custom calls keep one name per call site (one compile), and the
GPU suite's rank scripts pass on JAX's CPU backend at 2 ranks (--allow-cpu: eager CPU
arrays then take the custom call, the route eager GPU arrays take)."""

import os
import sys

import numpy as np
import pytest
from mpi_harness import SCRIPTS_DIR, run_ranks

jax = pytest.importorskip("jax")
from lockstep import _core  # noqa: E402
from lockstep.jax import compiled_ops, device_arrays, ffi_library  # noqa: E402

GPU_SCRIPTS = SCRIPTS_DIR.parents[1] / "gpu" / "scripts"


def test_cuda_handler_is_built_exactly_with_the_gpu_backend():
    if not ffi_library._LIBRARY.exists():
        pytest.skip("lockstep/_jax_ops.so is not built")
    assert ffi_library.has_cuda_handler() == bool(_core.nccl_built()), _core.nccl_built()
    assert ffi_library.cuda_registered() == (ffi_library.has_cuda_handler() and ffi_library.jax_has_cuda())


def test_only_gpu_arrays_leave_the_host_path():
    cpu = jax.numpy.arange(3.0)
    assert not device_arrays.on_gpu(cpu, np.arange(3), 1.0)
    seen = []
    jax.jit(lambda x: seen.append(device_arrays.on_gpu(x)) or x)(cpu)
    assert seen == [False], "a traced value is not an eager GPU array"


def test_eager_names_are_one_per_call_site_and_traced_names_count_traces():
    eager = [compiled_ops.traced_name("allreduce", None) for _ in range(2)]
    site = f"test_jax_gpu_route.py:{sys._getframe().f_lineno - 1}"
    assert eager == [f"allreduce.trace.{site}.eager"] * 2, eager
    traced = []
    trace = jax.jit(lambda x: traced.append(compiled_ops.traced_name("allreduce", None)) or x)
    trace(np.zeros(1))
    trace(np.zeros(2))  # a new shape: traced again
    assert len(traced) == 2 and traced[0] != traced[1], traced
    site = f"test_jax_gpu_route.py:{sys._getframe().f_lineno - 4}"
    assert traced == [f"allreduce.trace.{site}.0", f"allreduce.trace.{site}.1"], traced
    assert compiled_ops.traced_name("allreduce", "given") == "given"


@pytest.mark.parametrize("script", ["gpu_jax_collectives.py", "gpu_jax_training.py", "gpu_jax_errors.py"])
def test_gpu_scripts_pass_on_cpu(script, built_extension):
    # The GPU scripts import the CPU suite's checks (rank_checks, jax_collectives...).
    package = os.environ.get("LOCKSTEP_TEST_PACKAGE_ROOT", str(SCRIPTS_DIR.parents[2] / "python"))
    run = run_ranks(
        GPU_SCRIPTS / script,
        2,
        timeout=300,
        args=["--allow-cpu"],
        env={
            "PYTHONPATH": os.pathsep.join([package, str(SCRIPTS_DIR)]),
            "LOCKSTEP_STALL_CHECK_TIME_SECONDS": "2",
            "LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS": "6",
        },
    )
    run.assert_all_ranks_passed(2)
