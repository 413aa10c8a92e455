# The TensorFlow op library lockstep/_tensorflow_ops.so: asynchronous kernels that
# enqueue into the core. Built against the TensorFlow the Python interpreter imports,
# with the compile and link flags tf.sysconfig reports (its C++ ABI and Eigen
# alignment must match the installed TensorFlow exactly).

if(LOCKSTEP_WITH_TENSORFLOW STREQUAL "OFF")
  return()
endif()

execute_process(
  COMMAND ${CMAKE_COMMAND} -E env TF_CPP_MIN_LOG_LEVEL=3 ${Python_EXECUTABLE} -c
    "import tensorflow as tf; print('|'.join(tf.sysconfig.get_compile_flags())); print('|'.join(tf.sysconfig.get_link_flags()))"
  RESULT_VARIABLE _tf_result
  OUTPUT_VARIABLE _tf_output
  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _tf_result EQUAL 0)
  if(LOCKSTEP_WITH_TENSORFLOW STREQUAL "ON")
    message(FATAL_ERROR "LOCKSTEP_WITH_TENSORFLOW=ON, but ${Python_EXECUTABLE} cannot import tensorflow")
  endif()
  message(STATUS "lockstep: TensorFlow not importable by ${Python_EXECUTABLE}; skipping its op library")
  return()
endif()

# Two lines, flags separated by '|'.
string(REPLACE "\n" ";" _tf_lines "${_tf_output}")
list(GET _tf_lines -2 _tf_compile_flags)
list(GET _tf_lines -1 _tf_link_flags)
string(REPLACE "|" ";" _tf_compile_flags "${_tf_compile_flags}")
string(REPLACE "|" ";" _tf_link_flags "${_tf_link_flags}")

file(GLOB LOCKSTEP_TF_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/csrc/bindings/tensorflow/*.cc)
add_library(_tensorflow_ops MODULE ${LOCKSTEP_TF_SOURCES})
set_target_properties(_tensorflow_ops PROPERTIES PREFIX "" CXX_VISIBILITY_PRESET hidden)
foreach(flag IN LISTS _tf_compile_flags)
  if(flag MATCHES "^-I(.*)")
    # SYSTEM: TensorFlow's own headers are not held to our warning flags.
    target_include_directories(_tensorflow_ops SYSTEM PRIVATE ${CMAKE_MATCH_1})
  elseif(flag MATCHES "^-D(.*)")
    target_compile_definitions(_tensorflow_ops PRIVATE ${CMAKE_MATCH_1})
  endif()  # --std=c++17 is the project's standard already
endforeach()
target_link_libraries(_tensorflow_ops PRIVATE lockstep_core ${_tf_link_flags})
target_compile_options(_tensorflow_ops PRIVATE ${LOCKSTEP_WARNINGS})
lockstep_beside_core(_tensorflow_ops)
add_dependencies(lockstep_python _tensorflow_ops)
message(STATUS "lockstep: building the TensorFlow op library")
