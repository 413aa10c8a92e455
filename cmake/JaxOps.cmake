# The JAX FFI library lockstep/_jax_ops.so: the XLA FFI handler that runs lockstep's
# collectives inside jitted JAX programs. It needs only XLA's header-only FFI API,
# found under jax.ffi.include_dir() of the JAX the Python interpreter imports; the
# Python side loads it with ctypes and registers the handler as an FFI target.

if(LOCKSTEP_WITH_JAX STREQUAL "OFF")
  return()
endif()

execute_process(
  COMMAND ${Python_EXECUTABLE} -c "import jax.ffi; print(jax.ffi.include_dir())"
  RESULT_VARIABLE _jax_result
  OUTPUT_VARIABLE _jax_include_dir
  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _jax_result EQUAL 0)
  if(LOCKSTEP_WITH_JAX STREQUAL "ON")
    message(FATAL_ERROR "LOCKSTEP_WITH_JAX=ON, but ${Python_EXECUTABLE} cannot import jax.ffi")
  endif()
  message(STATUS "lockstep: JAX not importable by ${Python_EXECUTABLE}; skipping its FFI library")
  return()
endif()

file(GLOB LOCKSTEP_JAX_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csrc/bindings/jax/*.cc)
add_library(_jax_ops MODULE ${LOCKSTEP_JAX_SOURCES})
set_target_properties(_jax_ops PROPERTIES PREFIX "" CXX_VISIBILITY_PRESET hidden)
# SYSTEM: XLA's headers are not held to our warning flags.
target_include_directories(_jax_ops SYSTEM PRIVATE ${_jax_include_dir})
target_link_libraries(_jax_ops PRIVATE lockstep_core)
# GCC rejects c_api.h's struct fields that reuse their typedefs' names ("changes
# meaning"); -fpermissive makes that a warning, which SYSTEM headers do not show.
target_compile_options(_jax_ops PRIVATE ${LOCKSTEP_WARNINGS} $<$<CXX_COMPILER_ID:GNU>:-fpermissive>)
lockstep_beside_core(_jax_ops)
add_dependencies(lockstep_python _jax_ops)
message(STATUS "lockstep: building the JAX FFI library")
