"""The GPU code's tests that need no GPU: the build and discovery of the GPU backend,
the frontends' refusals, JAX's GPU route on the CPU, and that the GPU suite skips
where it cannot run. They live beside the GPU suite but run with the CPU suites
(`make test`), everywhere: tests/gpu/conftest.py skips only the tests of its own
folder where there is no GPU, and these take their fixtures (2 and 3 ranks) and
mpi_harness from tests/python."""

import sys
from pathlib import Path

CPU_TESTS_DIR = Path(__file__).resolve().parents[2] / "python"
sys.path.insert(0, str(CPU_TESTS_DIR))

from suite_fixtures import built_extension, num_ranks, refuse_optimized  # noqa: E402, F401


def pytest_configure(config):
    refuse_optimized()
