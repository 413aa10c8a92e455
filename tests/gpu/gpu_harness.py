"""Why the GPU suite cannot run here (if it cannot), and mpirun jobs of its rank scripts.

Several ranks share the one GPU of a test machine. NCCL refuses two ranks of a
communicator on one GPU ("Duplicate GPU detected") unless they look like separate
hosts, so each rank gets its own NCCL_HOSTID and NCCL talks over loopback sockets.
That is test-harness business: the library itself never sets NCCL variables.
"""

import os
import sys
from pathlib import Path

GPU_TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = GPU_TESTS_DIR.parents[1]
SCRIPTS_DIR = GPU_TESTS_DIR / "scripts"
# rank_checks / torch_checks: the exact reference values of the CPU suite.
CPU_SCRIPTS_DIR = REPO_ROOT / "tests" / "python" / "scripts"
sys.path.insert(0, str(CPU_SCRIPTS_DIR.parent))
from mpi_harness import run_mpirun  # noqa: E402  (one way to run and stop mpirun jobs)

PACKAGE_ROOT = Path(os.environ.get("LOCKSTEP_TEST_PACKAGE_ROOT", REPO_ROOT / "python"))

# Each rank its own pretend host (expanded by the shell mpirun starts per rank).
_PER_RANK_ENV = 'export NCCL_HOSTID="pretend-host-$OMPI_COMM_WORLD_RANK"; exec "$@"'


def unavailable_reason():
    """None when the GPU suite can run, else the reason every test skips."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.is_available() is False"
    if not list((PACKAGE_ROOT / "lockstep").glob("_core*.so")):
        return f"lockstep._core is not built in {PACKAGE_ROOT / 'lockstep'} (make gpu-test builds it)"
    sys.path.insert(0, str(PACKAGE_ROOT))
    from lockstep import _core

    if not _core.nccl_built():
        return "this lockstep build has no GPU collectives (nccl_built() is 0: built without CUDA/NCCL)"
    problem = _core.nccl_info()["problem"]
    if problem:
        return f"lockstep's GPU path cannot run here: {problem}"
    return None


def environment(extra_env):
    env = dict(os.environ)
    paths = [str(PACKAGE_ROOT), str(SCRIPTS_DIR), str(CPU_SCRIPTS_DIR)]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["NCCL_SOCKET_IFNAME"] = "lo"
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    # Whatever the calling shell set, each job starts from lockstep's defaults.
    for name in ("LOCKSTEP_GPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS"):
        env.pop(name, None)
    env.update(extra_env or {})
    return env


def run_gpu_ranks(script, num_ranks, timeout=300, env=None, args=()):
    """tests/gpu/scripts/<script> on num_ranks ranks sharing the GPU; never raises."""
    command = [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        str(num_ranks),
        "bash",
        "-c",
        _PER_RANK_ENV,
        "rank",
        sys.executable,
        str(SCRIPTS_DIR / script),
        *map(str, args),
    ]
    return run_mpirun(command, environment(env), timeout)
