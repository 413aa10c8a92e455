"""Why the JAX GPU tests cannot run here (if they cannot), and the environment their
ranks need on top of gpu_harness's (which gives each rank its own NCCL_HOSTID).

Whether JAX sees a CUDA device is asked in a child process: importing jax's CUDA
backend in the pytest process would take GPU memory the ranks need.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOT = Path(os.environ.get("LOCKSTEP_TEST_PACKAGE_ROOT", REPO_ROOT / "python"))

# Several ranks share the GPU: JAX would preallocate 75% of its memory per process.
JAX_RANK_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}

_PROBE = """
import ctypes, sys
try:
    import jax
except ImportError as error:
    sys.exit(f"jax is not installed ({error})")
try:
    devices = jax.devices("cuda")
except RuntimeError as error:
    sys.exit(f"jax has no CUDA backend here ({error})")
if not devices:
    sys.exit("jax sees no CUDA device")
sys.path.insert(0, sys.argv[1])
from lockstep import _core
if not _core.nccl_built():
    sys.exit("this lockstep build has no GPU collectives (nccl_built() is 0: built without CUDA/NCCL)")
problem = _core.nccl_info()["problem"]
if problem:
    sys.exit(f"lockstep's GPU path cannot run here: {problem}")
from lockstep.jax import ffi_library
if not ffi_library.has_cuda_handler():
    sys.exit("lockstep/_jax_ops.so has no CUDA handler (rebuild lockstep with JAX and the NCCL backend)")
"""


def unavailable_reason():
    """None when the JAX GPU tests can run, else the reason they skip."""
    if not list((PACKAGE_ROOT / "lockstep").glob("_core*.so")):
        return f"lockstep._core is not built in {PACKAGE_ROOT / 'lockstep'}"
    env = dict(os.environ, **JAX_RANK_ENV)
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _PROBE, str(PACKAGE_ROOT)], capture_output=True, text=True, timeout=180, env=env
        )
    except subprocess.TimeoutExpired:
        return "asking jax for CUDA devices took over 180 s"
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    return lines[-1] if lines else f"the jax CUDA probe exited with status {probe.returncode}"
