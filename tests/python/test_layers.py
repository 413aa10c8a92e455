"""tools/check_layers.py: csrc/ passes, and each kind of violation is caught."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import check_layers  # noqa: E402


def test_the_tree_follows_its_layers():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_layers.py")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout


def write(root, relative, text=""):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tree(tmp_path):
    write(tmp_path, "wire/message.h")
    write(tmp_path, "negotiation/controller.h", '#include "wire/message.h"\n')
    write(tmp_path, "engine/engine.h", '#include "negotiation/controller.h"\n')
    write(tmp_path, "backends/mpi/mpi_world.h", '#include "backends/communicator.h"\n')
    write(tmp_path, "backends/mpi/mpi_ops.h", "#include <mpi.h>\n")
    write(tmp_path, "backends/communicator.h")
    write(tmp_path, "backends/nccl/device.cc", '#include "backends/mpi/mpi_ops.h"\n')
    write(tmp_path, "engine/engine.cc", '#include "engine/engine.h"\n#include "backends/mpi/mpi_world.h"\n')
    write(tmp_path, "bindings/module.cc", '#include "lockstep/lockstep.h"\n#include "local.h"\n')
    write(tmp_path, "api/facade.cc", '#include "lockstep/lockstep.h"\n#include "engine/engine.h"\n')
    write(tmp_path, "backends/collectives.h", '#include "lockstep/values.h"\n')
    assert check_layers.violations(tmp_path) == []
    return tmp_path


@pytest.mark.parametrize(
    "relative, text, complaint",
    [
        ("wire/bad.cc", '#include "engine/engine.h"\n', "wire/ is below engine/"),
        ("fusion/bad.cc", '#include "negotiation/controller.h"\n', "siblings"),
        ("backends/host/bad.cc", '#include "backends/mpi/mpi_ops.h"\n', "siblings"),
        ("engine/bad.cc", "#include <mpi.h>\n", "must not see MPI"),
        ("engine/bad.cc", '#include "backends/mpi/mpi_ops.h"\n', "must not see MPI"),
        ("bindings/bad.cc", '#include "engine/engine.h"\n', "only the public headers"),
        ("backends/bad.cc", '#include "lockstep/lockstep.h"\n', "backends/ is below api/"),
        ("engine/bad.h", '#include "lockstep/lockstep.h"\n', "engine/ is below api/"),
        ("newfolder/bad.cc", "", "has no layer"),
    ],
)
def test_each_kind_of_violation_is_named(tree, relative, text, complaint):
    write(tree, relative, text)
    found = check_layers.violations(tree)
    assert len(found) == 1 and complaint in found[0], found


def test_a_public_header_including_the_core_is_named(tmp_path):
    (tmp_path / "lockstep.h").write_text('#include "lockstep/types.h"\n#include "engine/engine.h"\n')
    found = check_layers.public_violations(tmp_path)
    assert len(found) == 1 and "engine/engine.h" in found[0], found
