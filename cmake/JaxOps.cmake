# The JAX FFI library lockstep/_jax_ops.so: the XLA FFI handler that runs lockstep's
# collectives inside jitted JAX programs. It needs only XLA's header-only FFI API,
# found under jax.ffi.include_dir() of the JAX the Python interpreter imports; the
# Python side loads it with ctypes and registers the handler as an FFI target. Builds
# with the GPU (NCCL) backend add the CUDA handler (csrc/bindings/jax/cuda/), which
# Python registers for the CUDA platform.

lockstep_query_framework(LOCKSTEP_WITH_JAX JAX "import jax.ffi; print(jax.ffi.include_dir())"
  _jax_include_dir)
if(NOT _jax_include_dir)
  return()
endif()

lockstep_framework_library(_jax_ops ${CMAKE_CURRENT_SOURCE_DIR}/csrc/bindings/jax)
# SYSTEM: XLA's headers are not held to our warning flags.
target_include_directories(_jax_ops SYSTEM PRIVATE ${_jax_include_dir})
# GCC rejects c_api.h's struct fields that reuse their typedefs' names ("changes
# meaning"); -fpermissive makes that a warning, which SYSTEM headers do not show.
target_compile_options(_jax_ops PRIVATE $<$<CXX_COMPILER_ID:GNU>:-fpermissive>)
if(LOCKSTEP_HAVE_NCCL)
  target_sources(_jax_ops PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/csrc/bindings/jax/cuda/cuda_handler.cc)
  target_link_libraries(_jax_ops PRIVATE CUDA::cudart_static)
  message(STATUS "lockstep: building the JAX FFI library (CPU and CUDA handlers)")
else()
  message(STATUS "lockstep: building the JAX FFI library (CPU handler)")
endif()
