"""Shared fixtures for the multi-rank Python suite."""

import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS_DIR))  # for mpi_harness
REPO_ROOT = TESTS_DIR.parents[1]


@pytest.fixture(scope="session", autouse=True)
def built_extension():
    """Every test here needs lockstep._core; say how to build it rather than fail obscurely."""
    built = list((REPO_ROOT / "python" / "lockstep").glob("_core*.so"))
    assert built, ("lockstep._core is not built: run `cmake -S . -B build "
                   "-DPython_EXECUTABLE=$PWD/.venv/bin/python && cmake --build build -j2` first")


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def num_ranks(request):
    return request.param
