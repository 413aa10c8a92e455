"""What the CPU suites share: tests/python and tests/gpu/no_device (the GPU code's
tests that need no GPU) import these into their conftest.py."""

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parents[1]
# The suite tests the in-tree package (the extension builds into python/lockstep),
# the same one mpi_harness puts on the ranks' PYTHONPATH; the sanitizer builds point
# LOCKSTEP_TEST_PACKAGE_ROOT at their own copy.
PACKAGE_ROOT = Path(os.environ.get("LOCKSTEP_TEST_PACKAGE_ROOT", REPO_ROOT / "python"))
sys.path.insert(0, str(PACKAGE_ROOT))


def refuse_optimized():
    # python -O strips the asserts every test checks with: refuse rather than pass unchecked.
    if not __debug__:
        raise pytest.UsageError("the tests check with assert: run pytest without python -O / PYTHONOPTIMIZE")


@pytest.fixture(scope="session")
def built_extension():
    """Multi-rank tests need lockstep._core; say how to build it rather than fail obscurely."""
    built = list((PACKAGE_ROOT / "lockstep").glob("_core*.so"))
    assert built, (
        "lockstep._core is not built: run `cmake -S . -B build "
        "-DPython_EXECUTABLE=$PWD/.venv/bin/python && cmake --build build -j2` first"
    )


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def num_ranks(request, built_extension):
    """Rank counts for multi-rank tests: 2, and 3 (more ranks than this CI's cores)."""
    return request.param
