"""Shared fixtures for the multi-rank Python suite."""

import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS_DIR))  # for mpi_harness, suite_fixtures, check_plugin

# One test per named check of a rank script (check_plugin.py): its hooks and fixture.
import check_plugin  # noqa: E402
from check_plugin import pytest_collection_finish, pytest_generate_tests, rank_check  # noqa: E402, F401
from suite_fixtures import built_extension, num_ranks, refuse_optimized  # noqa: E402, F401


def pytest_configure(config):
    refuse_optimized()
    check_plugin.configure(config)


@pytest.fixture(scope="module")
def cluster(built_extension):  # noqa: F811 - the fixture imported above
    """A pretend cluster (tests/python/pretend_cluster.py): hosts node1, node2, node3 with
    2, 2 and 1 slots, made per test module; skipped, with the reason, where network
    namespaces cannot be made (not root, no `ip`)."""
    import pretend_cluster

    reason = pretend_cluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with pretend_cluster.PretendCluster([2, 2, 1]) as made:
        yield made
