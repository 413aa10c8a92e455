"""The GPU suite (make gpu-test): every test skips, with the reason, where it cannot
run (no CUDA device, or a lockstep build without GPU collectives), so the suite can
be collected anywhere."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_harness  # noqa: E402

_REASON = gpu_harness.unavailable_reason()


def pytest_report_header(config):
    return f"lockstep GPU suite: {'skipped: ' + _REASON if _REASON else 'running'}"


def pytest_collection_modifyitems(config, items):
    if _REASON is None:
        return
    marker = pytest.mark.skip(reason=_REASON)
    for item in items:
        if Path(str(item.fspath)).resolve().parent == Path(__file__).resolve().parent:
            item.add_marker(marker)


@pytest.fixture(params=[1, 2, 3], ids=lambda n: f"np{n}")
def num_ranks(request):
    """1 rank, and 2 and 3 ranks sharing the machine's GPU."""
    return request.param


@pytest.fixture(params=[2, 3], ids=lambda n: f"np{n}")
def multi_ranks(request):
    return request.param
