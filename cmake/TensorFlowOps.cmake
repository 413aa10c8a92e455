# The TensorFlow op library lockstep/_tensorflow_ops.so: asynchronous kernels that
# enqueue into the core. Built against the TensorFlow the Python interpreter imports,
# with the compile and link flags tf.sysconfig reports (its C++ ABI and Eigen
# alignment must match the installed TensorFlow exactly).

lockstep_query_framework(LOCKSTEP_WITH_TENSORFLOW TensorFlow
  "import tensorflow as tf; print('|'.join(tf.sysconfig.get_compile_flags())); print('|'.join(tf.sysconfig.get_link_flags()))"
  _tf_output)
if(NOT _tf_output)
  return()
endif()

# Two lines, flags separated by '|'.
string(REPLACE "\n" ";" _tf_lines "${_tf_output}")
list(GET _tf_lines -2 _tf_compile_flags)
list(GET _tf_lines -1 _tf_link_flags)
string(REPLACE "|" ";" _tf_compile_flags "${_tf_compile_flags}")
string(REPLACE "|" ";" _tf_link_flags "${_tf_link_flags}")

lockstep_framework_library(_tensorflow_ops ${CMAKE_CURRENT_SOURCE_DIR}/csrc/bindings/tensorflow)
foreach(flag IN LISTS _tf_compile_flags)
  if(flag MATCHES "^-I(.*)")
    # SYSTEM: TensorFlow's own headers are not held to our warning flags.
    target_include_directories(_tensorflow_ops SYSTEM PRIVATE ${CMAKE_MATCH_1})
  elseif(flag MATCHES "^-D(.*)")
    target_compile_definitions(_tensorflow_ops PRIVATE ${CMAKE_MATCH_1})
  endif()  # --std=c++17 is the project's standard already
endforeach()
target_link_libraries(_tensorflow_ops PRIVATE ${_tf_link_flags})
message(STATUS "lockstep: building the TensorFlow op library")
