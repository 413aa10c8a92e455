"""Checks that csrc/'s folders include each other only downwards, along the data's path.

Each folder sits in a layer; a file may include headers of its own folder and of
folders in lower layers, never of a higher layer or of another folder in its own layer
(the exceptions are listed in SIDEWAYS). The control plane (wire/, negotiation/) does
no arithmetic on tensor data, so it never includes reduction/ (CONTROL_PLANE): the
payload lane's data work lives in backends/host/payload_lane. Above the backends
nothing sees MPI: no
`#include <mpi.h>` there, and of backends/mpi/ only mpi_world.h, which is MPI-free.
The bindings use only the public headers in include/lockstep/, which include nothing
but each other. Of those, the facade lockstep/lockstep.h is what api/ implements, so
only api/ and the bindings above it include it; the layers below take the values they
pass around from lockstep/values.h and lockstep/types.h.

    python tools/check_layers.py [csrc]       (exit status 1 with one line per violation)
"""

import pathlib
import re
import sys

# Lowest first. include/lockstep is the public boundary, below everything.
LAYERS = [
    ["include/lockstep"],
    ["common"],
    ["reduction"],
    ["wire"],
    ["fusion", "negotiation"],
    ["backends"],  # the interfaces every backend implements
    ["backends/host", "backends/mpi", "backends/nccl", "backends/no_gpu", "submit"],
    ["engine"],
    ["api"],
    ["bindings"],
]
# Same-layer includes that are part of the design: NCCL agrees on outcomes over MPI.
SIDEWAYS = {("backends/nccl", "backends/mpi")}
# Lower folders these may not include although they could by layer: negotiation decides
# what rides in the payload lane, and never reads, scales or reduces tensor memory.
CONTROL_PLANE = {"wire": {"reduction"}, "negotiation": {"reduction"}}
ONLY_PUBLIC = {"bindings"}  # may include nothing of csrc/ but the public headers
# The facade api/ implements: below api/, including it would climb a layer.
FACADE = "lockstep/lockstep.h"
FACADE_USERS = {"api", "bindings"}
# Folders that may not see MPI, and the MPI-free headers of backends/mpi/ they may use.
MPI_FREE = {"common", "reduction", "wire", "fusion", "negotiation", "submit", "engine", "api", "bindings"}
MPI_FREE_HEADERS = {"backends/mpi/mpi_world.h"}

SOURCES = ("*.cc", "*.h", "*.cu", "*.cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def folder_of(relative):
    """csrc-relative path -> its folder's name in LAYERS (backends' subfolders apart)."""
    parts = pathlib.PurePosixPath(relative).parts
    if parts[0] == "lockstep":  # "lockstep/x.h": the public headers
        return "include/lockstep"
    if parts[0] == "backends" and len(parts) > 2:
        return f"backends/{parts[1]}"
    return parts[0] if len(parts) > 1 else ""


def layer_of(folder):
    for index, folders in enumerate(LAYERS):
        if folder in folders:
            return index
    return None


def violations(csrc):
    csrc = pathlib.Path(csrc)
    found = []
    files = sorted(path for pattern in SOURCES for path in csrc.rglob(pattern))
    for path in files:
        relative = path.relative_to(csrc).as_posix()
        source = folder_of(relative)
        source_layer = layer_of(source)
        if source_layer is None:
            found.append(f"{relative}: folder '{source}' has no layer in tools/check_layers.py")
            continue
        for bracket, name in INCLUDE.findall(path.read_text(errors="replace")):
            where = f"csrc/{relative}: #include {bracket}{name}"
            if bracket == "<":
                if name == "mpi.h" and source in MPI_FREE:
                    found.append(f"{where}: {source}/ must not see MPI (use the transport seam)")
                continue
            if not (csrc / name).exists() and not name.startswith("lockstep/"):
                continue  # a header next to the file, or a third party's
            if name == FACADE and source not in FACADE_USERS:
                found.append(f"{where}: {source}/ is below api/; take values from lockstep/values.h")
                continue
            target = folder_of(name)
            if target == source:
                continue
            target_layer = layer_of(target)
            if source in ONLY_PUBLIC and target != "include/lockstep":
                found.append(f"{where}: {source}/ uses only the public headers in include/lockstep/")
            elif target_layer is None or target_layer > source_layer:
                found.append(f"{where}: {source}/ is below {target}/")
            elif target_layer == source_layer and (source, target) not in SIDEWAYS:
                found.append(f"{where}: {source}/ and {target}/ are siblings")
            elif target in CONTROL_PLANE.get(source, ()):
                found.append(f"{where}: {source}/ is the control plane: tensor data is backends/host/payload_lane's")
            elif target == "backends/mpi" and source in MPI_FREE and name not in MPI_FREE_HEADERS:
                found.append(f"{where}: {source}/ must not see MPI (use the transport seam)")
    return found


def public_violations(include):
    """The public headers (include/lockstep/) may include only each other."""
    found = []
    for path in sorted(pathlib.Path(include).glob("*.h")):
        for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', path.read_text(errors="replace"), re.M):
            if not name.startswith("lockstep/"):
                found.append(f'include/lockstep/{path.name}: #include "{name}": public headers include only lockstep/')
    return found


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    csrc = sys.argv[1] if len(sys.argv) > 1 else root / "csrc"
    found = violations(csrc) + (public_violations(root / "include" / "lockstep") if len(sys.argv) <= 1 else [])
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
