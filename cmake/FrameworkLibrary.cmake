# Helpers for the optional framework libraries (TensorFlow ops, JAX FFI handler):
# each is built only where the Python that builds lockstep can import its framework,
# as a module beside the core.

# Runs `code` in ${Python_EXECUTABLE} and stores its output in `out_var`; stores ""
# when `option` (AUTO, ON or OFF) is OFF or the import fails, and stops configuring
# when it fails although `option` is ON.
function(lockstep_query_framework option framework code out_var)
  set(${out_var} "" PARENT_SCOPE)
  if("${${option}}" STREQUAL "OFF")
    return()
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env TF_CPP_MIN_LOG_LEVEL=3 ${Python_EXECUTABLE} -c "${code}"
    RESULT_VARIABLE result
    OUTPUT_VARIABLE output
    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    if("${${option}}" STREQUAL "ON")
      message(FATAL_ERROR "${option}=ON, but ${Python_EXECUTABLE} cannot import ${framework}")
    endif()
    message(STATUS "lockstep: ${framework} not importable by ${Python_EXECUTABLE}; skipping its library")
    return()
  endif()
  set(${out_var} "${output}" PARENT_SCOPE)
endfunction()

# A module library `target` from `source_dir`/*.cc, linked to the core, landing
# beside it in the package, and built with the Python libraries.
function(lockstep_framework_library target source_dir)
  file(GLOB sources CONFIGURE_DEPENDS ${source_dir}/*.cc)
  add_library(${target} MODULE ${sources})
  set_target_properties(${target} PROPERTIES PREFIX "" CXX_VISIBILITY_PRESET hidden)
  target_link_libraries(${target} PRIVATE lockstep_core)
  target_compile_options(${target} PRIVATE ${LOCKSTEP_WARNINGS})
  lockstep_beside_core(${target})
  add_dependencies(lockstep_python ${target})
endfunction()
