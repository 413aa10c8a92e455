// Configure-time probe (cmake/CxxRuntimeCheck.cmake): prints "shared" when the C++
// runtime was loaded as a shared library, "static" when it was linked in.
#include <link.h>

#include <cstdio>
#include <cstring>
#include <sstream>

static int FindRuntime(struct dl_phdr_info* info, size_t, void* found) {
  const char* name = info->dlpi_name;
  if (name && (std::strstr(name, "libstdc++.so") || std::strstr(name, "libc++.so"))) {
    *static_cast<bool*>(found) = true;
  }
  return 0;
}

int main() {
  std::ostringstream use_the_runtime;  // formatting a number: what crashed when static
  use_the_runtime << 42;
  bool shared = false;
  dl_iterate_phdr(FindRuntime, &shared);
  std::printf("%s\n", shared ? "shared" : "static");
  return 0;
}
