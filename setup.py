"""Packaging for lockstep: the Python frontends plus the CMake-built `lockstep._core`.

The extension is compiled by the project's own CMakeLists.txt (not by setuptools'
compiler driver) so that `pip install`, `make build` and the C++ tests all share one
build description.
"""

import os
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

PROJECT_ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    """An extension whose sources CMake knows; setuptools only needs its name."""

    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        output_dir = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        subprocess.check_call(
            ["cmake", "-S", PROJECT_ROOT, "-B", build_dir] + self._configure_args(output_dir))
        subprocess.check_call(
            ["cmake", "--build", build_dir, "--target", ext.target, "-j", _parallel_jobs()])

    def _configure_args(self, output_dir):
        import pybind11  # a build requirement, so only importable once the build starts

        return [
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            "-DLOCKSTEP_BUILD_TESTS=OFF",
            "-DLOCKSTEP_BUILD_PYTHON=ON",
            f"-DLOCKSTEP_PYTHON_OUTPUT_DIR={output_dir}",
            f"-DLOCKSTEP_WITH_NCCL={'ON' if _env_flag('LOCKSTEP_WITH_NCCL') else 'OFF'}",
        ]


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "on", "true", "yes")


def _parallel_jobs():
    # Two cores is the common developer and CI machine; more jobs only thrash memory.
    return os.environ.get("LOCKSTEP_BUILD_JOBS", str(min(os.cpu_count() or 1, 2)))


setup(
    name="lockstep",
    version="0.1.0",
    description="Horovod-style synchronous data-parallel training over MPI",
    python_requires=">=3.9",
    package_dir={"": "python"},
    packages=find_packages(where="python"),
    ext_modules=[CMakeExtension("lockstep._core", target="lockstep_python")],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=["numpy"],
    extras_require={"torch": ["torch"], "jax": ["jax", "jaxlib", "optax"], "test": ["pytest", "pytest-timeout", "mpi4py"]},
    entry_points={"console_scripts": ["lockstep-run = lockstep.run:main"]},
    zip_safe=False,
)
