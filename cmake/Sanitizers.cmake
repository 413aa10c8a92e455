# LOCKSTEP_SANITIZER: build every lockstep target instrumented.
#   address  AddressSanitizer + UndefinedBehaviorSanitizer (any report aborts)
#   thread   ThreadSanitizer
# Each belongs in its own build folder (make sanitize uses build-asan, build-tsan),
# since instrumented and plain objects must not be mixed.
set(LOCKSTEP_SANITIZER "" CACHE STRING "Instrument the build: address (ASan+UBSan), thread (TSan) or empty")
set_property(CACHE LOCKSTEP_SANITIZER PROPERTY STRINGS "" address thread)

if(LOCKSTEP_SANITIZER STREQUAL "address")
  # -fno-sanitize-recover: UBSan findings abort like ASan's instead of only printing.
  set(LOCKSTEP_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(LOCKSTEP_SANITIZER STREQUAL "thread")
  set(LOCKSTEP_SANITIZER_FLAGS -fsanitize=thread)
elseif(NOT LOCKSTEP_SANITIZER STREQUAL "")
  message(FATAL_ERROR "LOCKSTEP_SANITIZER must be address, thread or empty, not '${LOCKSTEP_SANITIZER}'")
endif()

if(LOCKSTEP_SANITIZER_FLAGS)
  # Frame pointers keep the reports' stacks complete; -g1 gives them line numbers.
  # -O1 -g1 (after the build type's flags, so they win) compile in about half the CPU
  # time of -O2 -g, which matters in CI: these builds are from scratch every run.
  # C and C++ only: nvcc warned about the second -O, and device code is not instrumented.
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:${LOCKSTEP_SANITIZER_FLAGS};-fno-omit-frame-pointer;-O1;-g1>")
  add_link_options(${LOCKSTEP_SANITIZER_FLAGS})
endif()
