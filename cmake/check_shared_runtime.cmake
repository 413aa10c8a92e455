# Post-build check (cmake -DLIBRARY=<file> -DNM=<nm> -P check_shared_runtime.cmake):
# fails, and removes LIBRARY, when it carries its own copy of the C++ runtime. Python
# and the frameworks already hold the shared libstdc++; a second copy inside one of
# lockstep's libraries splits locale and iostream state between them, and the first
# number formatted into an error message crashes (seen on the GPU machine, where a
# static libstdc++.a came in through CUDA's implicit link libraries).
if(NOT LIBRARY OR NOT NM)
  message(FATAL_ERROR "usage: cmake -DLIBRARY=<file> -DNM=<nm> -P check_shared_runtime.cmake")
endif()
execute_process(COMMAND ${NM} --defined-only ${LIBRARY} OUTPUT_VARIABLE symbols
                ERROR_VARIABLE nm_errors RESULT_VARIABLE nm_result)
if(NOT nm_result EQUAL 0)
  message(FATAL_ERROR "${NM} could not read ${LIBRARY}: ${nm_errors}")
endif()
# Defined only inside the C++ runtime itself (std::locale::classic, std::locale::id::_M_id
# of libstdc++; std::locale::classic of libc++).
if(symbols MATCHES "_ZNSt6locale7classicEv|_ZNKSt6locale2id5_M_idEv|_ZNSt3__16locale7classicEv")
  file(REMOVE ${LIBRARY})
  message(FATAL_ERROR
    "${LIBRARY} carries its own copy of the C++ runtime (libstdc++ linked statically), "
    "which crashes once loaded beside Python's and the frameworks' shared one. Something on "
    "the link line brought a static libstdc++: a compiler wrapper adding -static-libstdc++, "
    "LDFLAGS, or a libstdc++.a among CMake's implicit link libraries (see "
    "CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES in CMakeFiles/*/CMakeCUDACompiler.cmake). Build with "
    "the system compiler (CXX=/usr/bin/g++, and /usr/bin first on PATH for nvcc's host "
    "compiler) in a fresh build folder.")
endif()
