"""Shared fixtures for the multi-rank Python suite."""

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
sys.path.insert(0, str(TESTS_DIR))  # for mpi_harness

# One test per named check of a rank script (check_plugin.py): its hooks and fixture.
import check_plugin  # noqa: E402
from check_plugin import pytest_collection_finish, pytest_generate_tests, rank_check  # noqa: E402, F401


def pytest_configure(config):
    # python -O strips the asserts every test checks with: refuse rather than pass unchecked.
    if not __debug__:
        raise pytest.UsageError("the tests check with assert: run pytest without python -O / PYTHONOPTIMIZE")
    check_plugin.configure(config)


@pytest.fixture(scope="session")
def built_extension():
    """Multi-rank tests need lockstep._core; say how to build it rather than fail obscurely."""
    built = list((PACKAGE_ROOT / "lockstep").glob("_core*.so"))
    assert built, (
        "lockstep._core is not built: run `cmake -S . -B build "
        "-DPython_EXECUTABLE=$PWD/.venv/bin/python && cmake --build build -j2` first"
    )


@pytest.fixture(scope="module")
def cluster(built_extension):
    """A pretend cluster (tests/python/pretend_cluster.py): hosts node1, node2, node3 with
    2, 2 and 1 slots, made per test module; skipped, with the reason, where network
    namespaces cannot be made (not root, no `ip`)."""
    import pretend_cluster

    reason = pretend_cluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with pretend_cluster.PretendCluster([2, 2, 1]) as made:
        yield made


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def num_ranks(request, built_extension):
    """Rank counts for multi-rank tests: 2, and 3 (more ranks than this CI's cores)."""
    return request.param
