# Refuses compilers that link the C++ runtime statically (e.g. wrappers adding
# -static-libstdc++). lockstep's libraries are loaded into processes that already
# hold the system's shared libstdc++ (Python, PyTorch, TensorFlow): a second, private
# copy inside lockstep (worse with -Bsymbolic) splits locale and iostream state
# between the two, and every error message that formats a number crashed.
option(LOCKSTEP_ALLOW_STATIC_LIBSTDCXX
       "Build even if the C++ compiler links libstdc++ statically (known to crash)" OFF)

function(lockstep_check_cxx_runtime)
  set(probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/lockstep_cxx_runtime)
  try_run(run_result compile_result ${probe_dir} ${CMAKE_CURRENT_LIST_DIR}/check_cxx_runtime.cc
          COMPILE_OUTPUT_VARIABLE compile_output RUN_OUTPUT_VARIABLE run_output)
  if(NOT compile_result OR NOT run_result EQUAL 0)
    message(FATAL_ERROR "Could not build and run a small C++ program with ${CMAKE_CXX_COMPILER}:\n"
                        "${compile_output}")
  endif()
  string(STRIP "${run_output}" linkage)
  set(flags "${CMAKE_SHARED_LINKER_FLAGS} ${CMAKE_MODULE_LINKER_FLAGS}")
  if(flags MATCHES "-static-libstdc\\+\\+")
    set(linkage static)
  endif()
  if(NOT linkage STREQUAL "static")
    return()
  endif()
  set(compiler "${CMAKE_CXX_COMPILER} (${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION})")
  if(LOCKSTEP_ALLOW_STATIC_LIBSTDCXX)
    message(WARNING "${compiler} links libstdc++ statically; continuing because "
                    "LOCKSTEP_ALLOW_STATIC_LIBSTDCXX=ON. Expect crashes in error paths.")
    return()
  endif()
  message(FATAL_ERROR
    "The C++ compiler ${compiler} links the C++ runtime (libstdc++) statically. "
    "lockstep's libraries are loaded next to the shared libstdc++ of Python and the "
    "frameworks, and a private static copy makes them crash (SIGSEGV when an error "
    "message formats a number). Pick a compiler that links it dynamically, e.g. the "
    "system g++: configure a fresh build folder with `CXX=/usr/bin/g++ cmake ...` or "
    "`cmake -DCMAKE_CXX_COMPILER=/usr/bin/g++ ...`. To build anyway, pass "
    "-DLOCKSTEP_ALLOW_STATIC_LIBSTDCXX=ON.")
endfunction()

lockstep_check_cxx_runtime()

# The same promise checked on what was built, whatever brought the runtime in: each of
# lockstep's libraries that Python loads fails its build if it holds a copy of it.
set(LOCKSTEP_CHECK_SHARED_RUNTIME_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/check_shared_runtime.cmake)
function(lockstep_require_shared_cxx_runtime target)
  if(LOCKSTEP_ALLOW_STATIC_LIBSTDCXX OR NOT CMAKE_NM)
    return()
  endif()
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DLIBRARY=$<TARGET_FILE:${target}> -DNM=${CMAKE_NM}
            -P ${LOCKSTEP_CHECK_SHARED_RUNTIME_SCRIPT}
    VERBATIM)
endfunction()
