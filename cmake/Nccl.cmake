# The GPU (NCCL) backend. LOCKSTEP_WITH_NCCL=AUTO builds it where a CUDA compiler, the
# CUDA toolkit and NCCL are found; ON requires them and says what is missing; OFF
# skips it. Either way the core builds from the same sources: csrc/backends/nccl/ with
# the backend, csrc/backends/no_gpu/ without.
#
# One build must run everywhere, so the core links no shared CUDA library: the CUDA
# runtime is linked statically (it reports a missing driver as an error instead of
# failing to load) and libnccl is opened at run time (the copy a framework already
# loaded, else libnccl.so.2, else the library found here).

set(LOCKSTEP_WITH_NCCL AUTO CACHE STRING "Build the NCCL backend for GPU tensors: AUTO, ON or OFF")
set_property(CACHE LOCKSTEP_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
# Hopper, and Ampere for the machines most clusters still have.
set(LOCKSTEP_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures of the GPU kernels")


set(LOCKSTEP_HAVE_NCCL OFF)
if(NOT LOCKSTEP_WITH_NCCL STREQUAL "OFF")
  set(nccl_missing "")
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER OR NOT EXISTS "${CMAKE_CUDA_COMPILER}")
    list(APPEND nccl_missing "a CUDA compiler (nvcc on PATH, or CMAKE_CUDA_COMPILER)")
  endif()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    list(APPEND nccl_missing "the CUDA toolkit (set CUDAToolkit_ROOT)")
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
               PATH_SUFFIXES lib lib64)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    list(APPEND nccl_missing "NCCL (nccl.h and libnccl.so; set NCCL_HOME)")
  endif()
  if(nccl_missing)
    list(JOIN nccl_missing "; " nccl_missing_text)
    if(LOCKSTEP_WITH_NCCL STREQUAL "ON")
      message(FATAL_ERROR "LOCKSTEP_WITH_NCCL=ON, but the GPU backend cannot be built: missing "
                          "${nccl_missing_text}. Install them, or configure with -DLOCKSTEP_WITH_NCCL=OFF.")
    endif()
    message(STATUS "lockstep: no GPU (NCCL) backend: missing ${nccl_missing_text}")
  else()
    set(LOCKSTEP_HAVE_NCCL ON)
  endif()
endif()

if(LOCKSTEP_HAVE_NCCL)
  set(CMAKE_CUDA_ARCHITECTURES ${LOCKSTEP_CUDA_ARCHITECTURES})
  enable_language(CUDA)
  # CMake adds what nvcc's host compiler links implicitly to every CXX-linked target with
  # CUDA sources. Where the `g++` on PATH links libstdc++ statically (the GPU machine's
  # image), that list names libstdc++.a, and the core would carry a private copy of the
  # C++ runtime beside the process's shared one: a number formatted into an error
  # message then crashed (a null locale facet). The CXX linker adds the shared runtime,
  # so the C++ runtime goes from that list under any name; and a directory holding only
  # a static libstdc++ (a toolchain built to link it statically) would shadow the shared
  # one for the CXX linker's own -lstdc++, so such directories go too.
  list(FILTER CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES EXCLUDE REGEX "(^|/|-l)(lib)?stdc\\+\\+([^/]*\\.(a|so[.0-9]*))?$")
  foreach(directory IN LISTS CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES)
    if(EXISTS "${directory}/libstdc++.a" AND NOT EXISTS "${directory}/libstdc++.so")
      list(REMOVE_ITEM CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES "${directory}")
      message(STATUS "lockstep: not linking from ${directory} (it holds only a static libstdc++)")
    endif()
  endforeach()
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "lockstep: building the GPU (NCCL) backend for sm_${LOCKSTEP_CUDA_ARCHITECTURES} "
                 "(CUDA ${CUDAToolkit_VERSION}, ${NCCL_LIBRARY})")
  file(GLOB LOCKSTEP_GPU_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csrc/backends/nccl/*.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/csrc/backends/nccl/*.cu)
  target_sources(lockstep_core PRIVATE ${LOCKSTEP_GPU_SOURCES})
  # The target existed before CUDA was enabled, so it takes the architectures here.
  set_target_properties(lockstep_core PROPERTIES CUDA_ARCHITECTURES "${LOCKSTEP_CUDA_ARCHITECTURES}")
  target_include_directories(lockstep_core PRIVATE ${NCCL_INCLUDE_DIR})
  target_link_libraries(lockstep_core PRIVATE CUDA::cudart_static ${CMAKE_DL_LIBS})
  set_property(SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/csrc/backends/nccl/nccl_library.cc APPEND PROPERTY
               COMPILE_DEFINITIONS LOCKSTEP_NCCL_BUILD_LIBRARY="${NCCL_LIBRARY}")
  # nvcc passes host warnings through -Xcompiler; its own diagnostics are errors-free too.
  target_compile_options(lockstep_core PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
else()
  file(GLOB LOCKSTEP_NO_GPU_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csrc/backends/no_gpu/*.cc)
  target_sources(lockstep_core PRIVATE ${LOCKSTEP_NO_GPU_SOURCES})
endif()
