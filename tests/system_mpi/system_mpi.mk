# lockstep built against a system MPI: Debian's Open MPI 4.1, as on many clusters
# (LOCKSTEP_MPI=system), so that path cannot rot while the default is Open MPI 5 from
# PyPI. Included by the Makefile; `make test` runs it.
#   make test-system-mpi   build-system-mpi: C++ unit tests, then multi-rank numpy and
#                          torch, a pretend-cluster run, the restart-based elastic
#                          path and the launcher-mismatch errors, all on Open MPI 4.1
# Debian's Open MPI is installed here, not by `make setup`: the default path needs none.

SYSTEM_MPI_DIR := build-system-mpi
SYSTEM_MPI_PACKAGES := openmpi-bin libopenmpi-dev
SYSTEM_MPICC := /usr/bin/mpicc
SYSTEM_MPIRUN := /usr/bin/mpirun
SYSTEM_MPI_PYTESTS ?= tests/python/test_numpy_collectives.py tests/python/test_torch_collectives.py \
  tests/python/test_multihost.py tests/python/test_elastic_torch.py tests/python/test_launch_mismatch.py
# A cut-off host ends the job and restarts it on either MPI (a silent peer is no failed
# process to ULFM), and so does an added host, so the main suite covers both; a killed
# one (between steps) and the reset limit's restarts are what differ here. (A kill
# inside allreduces adds little over it on the restart path: the main suite's cut-off
# covers the watchdog's end.)
SYSTEM_MPI_PYTEST_FILTER ?= not (torch_collectives and np3) and not do_not_wake and not host_cut_off \
  and not added_host and not inside-allreduces

.PHONY: system-mpi-packages test-system-mpi

system-mpi-packages:
	@missing=""; \
	for pkg in $(SYSTEM_MPI_PACKAGES); do \
	  dpkg -s $$pkg 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing system packages:$$missing"; \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(SYSTEM_MPI_DIR)/CMakeCache.txt: Makefile tests/system_mpi/system_mpi.mk | $(REQUIREMENTS_STAMP) system-mpi-packages
	rm -f $@
	cmake -S . -B $(SYSTEM_MPI_DIR) -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BUILD_TESTS=ON \
	  -DLOCKSTEP_MPI=system -DMPI_C_COMPILER=$(SYSTEM_MPICC) -DMPIEXEC_EXECUTABLE=$(SYSTEM_MPIRUN) \
	  -DLOCKSTEP_WITH_NCCL=OFF -DLOCKSTEP_WITH_TENSORFLOW=OFF -DLOCKSTEP_WITH_JAX=OFF \
	  -DPython_EXECUTABLE=$(abspath $(PYTHON)) $(CCACHE) \
	  -DLOCKSTEP_PYTHON_OUTPUT_DIR=$(abspath $(SYSTEM_MPI_DIR))/python/lockstep

# As for ASan: the package folder holds this build's libraries beside links to the
# tree's Python sources, and the suite imports it (LOCKSTEP_TEST_PACKAGE_ROOT); the
# harness launches with the mpirun of the MPI that package was built against.
test-system-mpi: system-mpi-packages $(SYSTEM_MPI_DIR)/CMakeCache.txt
	cmake --build $(SYSTEM_MPI_DIR) -j$(JOBS)
	@for f in python/lockstep/*; do \
	  case $$f in *.so|*/__pycache__) ;; *) ln -sfn $(abspath .)/$$f $(SYSTEM_MPI_DIR)/python/lockstep/ ;; esac; \
	done
	@status=0; \
	ctest --test-dir $(SYSTEM_MPI_DIR) $(CTEST_ARGS) || status=1; \
	LOCKSTEP_TEST_PACKAGE_ROOT=$(abspath $(SYSTEM_MPI_DIR))/python \
	  $(PYTHON) -m pytest $(SYSTEM_MPI_PYTESTS) -k "$(SYSTEM_MPI_PYTEST_FILTER)" -v -rfE --timeout=300 || status=1; \
	exit $$status
