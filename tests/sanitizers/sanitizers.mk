# Sanitizer builds and the wire fuzzer (included by the Makefile; `make test` runs both).
#   make sanitize-asan   build-asan: C++ unit tests + the numpy/torch multi-rank suites
#                        with AddressSanitizer and UndefinedBehaviorSanitizer
#   make sanitize-tsan   build-tsan: C++ unit tests + a multi-user-thread stress at 2
#                        and 3 ranks with ThreadSanitizer
#   make fuzz            build-fuzz (clang): libFuzzer on the wire format for FUZZ_SECONDS
# Any sanitizer report fails the run: the runtimes abort with a non-zero status.

ASAN_DIR := build-asan
TSAN_DIR := build-tsan
FUZZ_DIR := build-fuzz
FUZZ_SECONDS ?= 30
# Its objects come from ccache as the other builds' do (the fuzzer is C++ only: no
# CUDA launcher, which CMake would call an unused variable).
FUZZ_CCACHE := $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
SANITIZER_CMAKE_ARGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKSTEP_BUILD_TESTS=ON \
  -DLOCKSTEP_WITH_TENSORFLOW=OFF -DLOCKSTEP_WITH_JAX=OFF -DPython_EXECUTABLE=$(abspath $(PYTHON))
# The multi-rank Python tests that run under ASan: a subset (numpy at 2 and 3 ranks,
# torch at 2), since everything runs several times slower instrumented.
ASAN_PYTESTS ?= tests/python/test_numpy_collectives.py tests/python/test_numpy_errors.py \
  tests/python/test_torch_collectives.py
ASAN_PYTEST_FILTER ?= not (torch_collectives and np3)

# Python itself is not instrumented, so the ASan runtime must be loaded first, and
# libstdc++ with it (else ASan cannot find the real __cxa_throw and aborts on the first
# C++ exception); leak checking is off there because the interpreter keeps its
# allocations until exit.
ASAN_PRELOAD = $(shell g++ -print-file-name=libasan.so) $(shell g++ -print-file-name=libstdc++.so.6)
ASAN_OPTIONS_COMMON := halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1
ASAN_ENV := UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=$(ASAN_OPTIONS_COMMON)
# Reports also go to files, so one from a process whose exit status a test expects
# to be non-zero (a rank killed on purpose) still fails the run.
ASAN_REPORTS := $(abspath $(ASAN_DIR))/reports
PYTHON_ASAN_ENV = UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(ASAN_REPORTS)/ubsan \
  ASAN_OPTIONS=$(ASAN_OPTIONS_COMMON):detect_leaks=0:log_path=$(ASAN_REPORTS)/asan \
  LD_PRELOAD="$(ASAN_PRELOAD)"
# Open MPI 5 from PyPI brings two things ThreadSanitizer cannot live with: UCX's
# memory hooks (libucm patches mmap/malloc when loaded, and every test that starts a
# thread crashed), and PMIx's gds/shmem2, which maps its segment at a fixed address
# inside the range TSan reserves (MPI_Init failed). Both are switched off here: UCX is
# not used on these hosts, and PMIx's hash component keeps the same data in memory.
TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4 \
  suppressions=$(abspath tests/sanitizers/tsan.supp)" UCX_MEM_EVENTS=no PMIX_MCA_gds=hash

sanitize: sanitize-asan sanitize-tsan

$(ASAN_DIR)/CMakeCache.txt: Makefile tests/sanitizers/sanitizers.mk | $(REQUIREMENTS_STAMP)
	rm -f $@
	cmake -S . -B $(ASAN_DIR) $(SANITIZER_CMAKE_ARGS) $(CCACHE) -DLOCKSTEP_SANITIZER=address \
	  -DLOCKSTEP_BUILD_PYTHON=ON -DLOCKSTEP_PYTHON_OUTPUT_DIR=$(abspath $(ASAN_DIR))/python/lockstep

$(TSAN_DIR)/CMakeCache.txt: Makefile tests/sanitizers/sanitizers.mk | $(REQUIREMENTS_STAMP)
	rm -f $@
	cmake -S . -B $(TSAN_DIR) $(SANITIZER_CMAKE_ARGS) $(CCACHE) -DLOCKSTEP_SANITIZER=thread \
	  -DLOCKSTEP_BUILD_PYTHON=OFF -DLOCKSTEP_PYTHON_OUTPUT_DIR=$(abspath $(TSAN_DIR))/lib

# The ASan package folder holds the instrumented libraries beside links to the
# tree's Python sources, and the suite imports it (LOCKSTEP_TEST_PACKAGE_ROOT).
sanitize-asan: $(ASAN_DIR)/CMakeCache.txt
	cmake --build $(ASAN_DIR) -j$(JOBS)
	@for f in python/lockstep/*; do \
	  case $$f in *.so|*/__pycache__) ;; *) ln -sfn $(abspath .)/$$f $(ASAN_DIR)/python/lockstep/ ;; esac; \
	done
	@status=0; \
	$(ASAN_ENV) ctest --test-dir $(ASAN_DIR) $(CTEST_ARGS) || status=1; \
	rm -rf $(ASAN_REPORTS) && mkdir -p $(ASAN_REPORTS); \
	$(PYTHON_ASAN_ENV) LOCKSTEP_TEST_PACKAGE_ROOT=$(abspath $(ASAN_DIR))/python \
	  $(PYTHON) -m pytest $(ASAN_PYTESTS) -k "$(ASAN_PYTEST_FILTER)" -v --timeout=300 || status=1; \
	if [ -n "$$(ls -A $(ASAN_REPORTS))" ]; then \
	  echo "Sanitizer reports from the Python suites:"; cat $(ASAN_REPORTS)/*; status=1; fi; \
	exit $$status

sanitize-tsan: $(TSAN_DIR)/CMakeCache.txt
	cmake --build $(TSAN_DIR) -j$(JOBS)
	@status=0; \
	$(TSAN_ENV) ctest --test-dir $(TSAN_DIR) $(CTEST_ARGS) || status=1; \
	for np in 2 3; do \
	  echo "ThreadSanitizer stress at $$np ranks"; \
	  $(TSAN_ENV) OMPI_MCA_mpi_yield_when_idle=1 timeout 300 $(VENV)/bin/mpirun --oversubscribe --bind-to none \
	    -np $$np $(TSAN_DIR)/lockstep_concurrent_enqueue 8 400 > $(TSAN_DIR)/stress-np$$np.log 2>&1; \
	  rc=$$?; cat $(TSAN_DIR)/stress-np$$np.log; \
	  passed=$$(grep -c 'ALL CHECKS PASSED' $(TSAN_DIR)/stress-np$$np.log); \
	  if [ $$rc -ne 0 ] || [ "$$passed" -ne $$np ] || grep -q 'ThreadSanitizer' $(TSAN_DIR)/stress-np$$np.log; then \
	    echo "ThreadSanitizer stress at $$np ranks FAILED (exit status $$rc)"; status=1; fi; \
	done; \
	exit $$status

# Skips (successfully, saying why) where clang or libFuzzer is missing; make setup
# installs both, so CI always fuzzes.
fuzz:
	@if ! command -v clang++ >/dev/null; then \
	  echo "SKIPPED fuzz: clang++ is not installed (make setup installs clang)"; exit 0; fi; \
	mkdir -p $(FUZZ_DIR); \
	if [ ! -f $(FUZZ_DIR)/CMakeCache.txt ] && ! cmake -S tests/fuzz -B $(FUZZ_DIR) \
	    -DCMAKE_CXX_COMPILER=clang++ $(FUZZ_CCACHE) > $(FUZZ_DIR)/configure.log 2>&1; then \
	  if grep -q 'cannot link -fsanitize=fuzzer' $(FUZZ_DIR)/configure.log; then \
	    echo "SKIPPED fuzz: libFuzzer is missing (make setup installs libclang-rt-14-dev)"; \
	    rm -rf $(FUZZ_DIR); exit 0; fi; \
	  cat $(FUZZ_DIR)/configure.log; exit 1; \
	fi; \
	cmake --build $(FUZZ_DIR) -j$(JOBS) && \
	rm -rf $(FUZZ_DIR)/corpus && mkdir -p $(FUZZ_DIR)/corpus && \
	$(FUZZ_DIR)/lockstep_wire_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus tests/fuzz/corpus
