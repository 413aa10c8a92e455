// GetMpiInfo(): the MPI this build was compiled against (from its headers and from
// cmake/Mpi.cmake's definitions, given to this file alone) and the one this process
// actually loaded.
#include <dlfcn.h>
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <cstring>
#include <string>

#include "backends/mpi/mpi_world.h"

#ifndef LOCKSTEP_MPI_SOURCE
#define LOCKSTEP_MPI_SOURCE "system"
#endif
#ifndef LOCKSTEP_MPI_BUILD_LIBRARY
#define LOCKSTEP_MPI_BUILD_LIBRARY ""
#endif
#ifndef LOCKSTEP_MPI_BUILD_MPIEXEC
#define LOCKSTEP_MPI_BUILD_MPIEXEC ""
#endif

namespace lockstep {
namespace {

std::string BuiltVersion() {
#if defined(OMPI_MAJOR_VERSION)
  return "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." +
         std::to_string(OMPI_MINOR_VERSION) + "." + std::to_string(OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
  return std::string("MPICH ") + MPICH_VERSION;
#else
  return "MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
#endif
}

constexpr bool kBuiltWithUlfm =
#if (defined(OMPI_HAVE_MPI_EXT_FTMPI) && OMPI_HAVE_MPI_EXT_FTMPI) || defined(MPIX_ERR_REVOKED)
    true;
#else
    false;
#endif

std::string FirstLine(const std::string& text) {
  const auto end = text.find('\n');
  std::string line = end == std::string::npos ? text : text.substr(0, end);
  while (!line.empty() && (line.back() == ' ' || line.back() == ',' || line.back() == '\0')) {
    line.pop_back();
  }
  return line;
}

}  // namespace

MpiInfo QueryMpiInfo() {
  MpiInfo info;
  info.source = LOCKSTEP_MPI_SOURCE;
  info.built_version = BuiltVersion();
  info.built_library = LOCKSTEP_MPI_BUILD_LIBRARY;
  info.built_launcher = LOCKSTEP_MPI_BUILD_MPIEXEC;
  info.built_with_ulfm = kBuiltWithUlfm;
  // Allowed before MPI_Init.
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(version, &length) == MPI_SUCCESS) {
    info.library_version = FirstLine(std::string(version, strnlen(version, sizeof(version))));
  }
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Get_library_version), &where) && where.dli_fname) {
    info.library_path = where.dli_fname;
  }
  info.library_has_ulfm = dlsym(RTLD_DEFAULT, "MPIX_Comm_shrink") != nullptr &&
                          dlsym(RTLD_DEFAULT, "MPIX_Comm_agree") != nullptr;
  return info;
}

}  // namespace lockstep
