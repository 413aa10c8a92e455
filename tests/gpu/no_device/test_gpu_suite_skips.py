"""The GPU suite (tests/gpu but no_device/, make gpu-test) is collected on machines
without a GPU too, and there every test must skip with its reason, never error or fail."""

import os
import re
import subprocess
import sys

import pytest
from mpi_harness import REPO_ROOT

torch = pytest.importorskip("torch")
GPU_TESTS = REPO_ROOT / "tests" / "gpu"  # without no_device/, this folder: they run anywhere


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: make gpu-test runs the suite itself")
def test_every_gpu_test_skips_with_the_reason_where_there_is_no_gpu():
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(GPU_TESTS), f"--ignore={GPU_TESTS / 'no_device'}", "-q", "-rs"]
        + ["-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    skipped = re.search(r"(\d+) skipped", summary)
    assert skipped and int(skipped.group(1)) >= 10, result.stdout
    assert not re.search(r"\d+ (passed|failed|error)", summary), summary
    assert "torch.cuda.is_available() is False" in result.stdout, result.stdout
