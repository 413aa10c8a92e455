"""Configure refuses a compiler that links libstdc++ statically (issue 13), unless told
to go ahead; the system compiler passes the check."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_CXX = shutil.which("g++")

pytestmark = pytest.mark.skipif(not shutil.which("cmake") or not SYSTEM_CXX, reason="needs cmake and g++")


def configure(tmp_path, cxx, *options):
    # Only the core: the check runs before any target, and Python/GTest would slow this.
    command = [
        "cmake",
        "-S",
        str(REPO_ROOT),
        "-B",
        str(tmp_path / "build"),
        f"-DCMAKE_CXX_COMPILER={cxx}",
        "-DLOCKSTEP_BUILD_TESTS=OFF",
        "-DLOCKSTEP_BUILD_PYTHON=OFF",
        *options,
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "CXXFLAGS", "LDFLAGS")}
    return subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)


@pytest.fixture
def static_wrapper(tmp_path):
    """A compiler wrapper like the one in the issue: static libstdc++, -Bsymbolic."""
    wrapper = tmp_path / "static-g++"
    wrapper.write_text(f'#!/bin/sh\nexec {SYSTEM_CXX} "$@" -static-libstdc++ -Wl,-Bsymbolic\n')
    wrapper.chmod(0o755)
    return wrapper


def test_static_libstdcxx_compiler_is_refused_with_a_clear_message(tmp_path, static_wrapper):
    result = configure(tmp_path, static_wrapper)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, output
    assert "links the C++ runtime (libstdc++) statically" in output, output
    assert str(static_wrapper) in output and "GNU" in output, output  # names the compiler
    assert "CXX=/usr/bin/g++" in output and "-DCMAKE_CXX_COMPILER=" in output, output
    assert "-DLOCKSTEP_ALLOW_STATIC_LIBSTDCXX=ON" in output, output


def test_override_lets_configure_go_through(tmp_path, static_wrapper):
    result = configure(tmp_path, static_wrapper, "-DLOCKSTEP_ALLOW_STATIC_LIBSTDCXX=ON")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 0, output
    assert "LOCKSTEP_ALLOW_STATIC_LIBSTDCXX=ON" in output, output  # still warns


def test_system_compiler_passes(tmp_path):
    result = configure(tmp_path, SYSTEM_CXX)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "statically" not in output, output
