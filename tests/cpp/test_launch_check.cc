// The launcher/library agreement checks of backends/mpi/launch_check.h, over made-up
// environments: which launchers each build refuses, and what the messages name.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "backends/mpi/launch_check.h"

namespace lockstep {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

MpiInfo WheelBuild() {
  MpiInfo info;
  info.source = "pypi";
  info.built_version = "Open MPI 5.0.11";
  info.built_library = "/venv/lib/libmpi.so";
  info.built_launcher = "/venv/bin/mpirun";
  info.library_version = "Open MPI v5.0.11, package: Open MPI";
  info.library_path = "/moved/venv/lib/libmpi.so.40";
  return info;
}

MpiInfo Debian41Build() {
  MpiInfo info;
  info.source = "system";
  info.built_version = "Open MPI 4.1.4";
  info.built_library = "/usr/lib/x86_64-linux-gnu/libmpi.so";
  info.built_launcher = "/usr/bin/mpirun";
  info.library_version = "Open MPI v4.1.4, package: Debian OpenMPI";
  info.library_path = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
  return info;
}

const FakeEnv kOrte{{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_MCA_orte_hnp_uri", "1.0;tcp://x"}}};
const FakeEnv kPrrte{
    {{"OMPI_COMM_WORLD_SIZE", "2"}, {"PRTE_LAUNCHED", "1"}, {"OMPI_VERSION", "5.0.11"}}};
const FakeEnv kHydra{{{"PMI_SIZE", "2"}, {"PMI_RANK", "0"}, {"PMI_FD", "5"}}};
const FakeEnv kNone{};

TEST(LaunchCheck, EachBuildAcceptsItsOwnLauncherAndNone) {
  EXPECT_EQ(LauncherMismatch(kPrrte.lookup(), WheelBuild()), "");
  EXPECT_EQ(LauncherMismatch(kOrte.lookup(), Debian41Build()), "");
  EXPECT_EQ(LauncherMismatch(kNone.lookup(), WheelBuild()), "");
  EXPECT_EQ(LauncherMismatch(kNone.lookup(), Debian41Build()), "");
}

TEST(LaunchCheck, OpenMpi4LauncherRefusedByOpenMpi5BuildNamingBothAndTheRightMpirun) {
  const std::string message = LauncherMismatch(kOrte.lookup(), WheelBuild());
  EXPECT_NE(message.find("Open MPI 5.0.11"), std::string::npos) << message;
  EXPECT_NE(message.find("ORTE"), std::string::npos) << message;
  // The wheel's mpirun beside the library actually loaded, not the build-time path.
  EXPECT_NE(message.find("/moved/venv/bin/mpirun"), std::string::npos) << message;
}

TEST(LaunchCheck, OpenMpi5AndHydraLaunchersRefusedByOpenMpi4Build) {
  const std::string prrte = LauncherMismatch(kPrrte.lookup(), Debian41Build());
  EXPECT_NE(prrte.find("Open MPI 5.0.11 (PRRTE)"), std::string::npos) << prrte;
  EXPECT_NE(prrte.find("/usr/bin/mpirun"), std::string::npos) << prrte;
  EXPECT_NE(LauncherMismatch(kHydra.lookup(), Debian41Build()).find("Hydra"), std::string::npos);
}

// Open MPI 5's mpirun puts its lib/ first on LD_LIBRARY_PATH, so a build against 4.1
// started by it has also loaded the wrong library: the launcher is named as the cause.
TEST(LaunchCheck, ForeignLauncherNamedEvenWhenItAlsoSwappedTheLibrary) {
  MpiInfo info = Debian41Build();
  info.library_version = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution";
  info.library_path = "/venv/lib/libmpi.so.40";
  const std::string message = LauncherMismatch(kPrrte.lookup(), info);
  EXPECT_NE(message.find("Open MPI 5.0.11 (PRRTE)"), std::string::npos) << message;
  EXPECT_NE(message.find("load Open MPI v5.0.11 (/venv/lib/libmpi.so.40)"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("package:"), std::string::npos) << message;
  EXPECT_NE(message.find("/usr/bin/mpirun"), std::string::npos) << message;
}

TEST(LaunchCheck, LoadedLibraryOfAnotherMpiIsRefused) {
  MpiInfo info = WheelBuild();
  info.library_version = "Open MPI v4.1.4, package: Debian OpenMPI";
  info.library_path = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
  const std::string message = LauncherMismatch(kNone.lookup(), info);
  EXPECT_NE(message.find("LD_LIBRARY_PATH"), std::string::npos) << message;
  EXPECT_NE(message.find("v4.1.4"), std::string::npos) << message;
}

TEST(LaunchCheck, WorldSizeMustMatchWhatTheLauncherSaid) {
  EXPECT_EQ(WorldSizeMismatch(kPrrte.lookup(), 2, WheelBuild()), "");
  const std::string alone = WorldSizeMismatch(kPrrte.lookup(), 1, WheelBuild());
  EXPECT_NE(alone.find("OMPI_COMM_WORLD_SIZE=2"), std::string::npos) << alone;
  EXPECT_NE(WorldSizeMismatch(kHydra.lookup(), 1, Debian41Build()).find("PMI_SIZE=2"),
            std::string::npos);
}

TEST(LaunchCheck, HorovodSizeOnlyJudgesAProcessLeftAlone) {
  const FakeEnv horovod{{{"HOROVOD_SIZE", "4"}}};
  const std::string plain = WorldSizeMismatch(horovod.lookup(), 1, WheelBuild());
  EXPECT_NE(plain.find("plain python"), std::string::npos) << plain;
  // A job re-formed at another size keeps its start environment: not an error.
  EXPECT_EQ(WorldSizeMismatch(horovod.lookup(), 3, WheelBuild()), "");
  const FakeEnv garbage{{{"HOROVOD_SIZE", "four"}, {"OMPI_COMM_WORLD_SIZE", ""}}};
  EXPECT_EQ(WorldSizeMismatch(garbage.lookup(), 1, WheelBuild()), "");
}

}  // namespace
}  // namespace lockstep
