// The GPU settings: LOCKSTEP_GPU_OPERATIONS (and Horovod's HOROVOD_GPU_OPERATIONS),
// LOCKSTEP_GPU_FUSION_THRESHOLD and LOCKSTEP_NCCL_TIMEOUT_SECONDS.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/config.h"
#include "parse_config.h"

namespace lockstep {
namespace {

using testing::Environment;
using testing::ErrorFor;
using testing::Parse;

TEST(GpuConfigTest, Defaults) {
  const Config config = Parse({});
  EXPECT_EQ(config.gpu_operations, GpuOperations::kNccl);
  EXPECT_FALSE(config.gpu_operations_set);
  EXPECT_EQ(config.gpu_fusion_threshold_bytes, 128 * 1024 * 1024);
  EXPECT_EQ(config.nccl_timeout_seconds, 300.0);
}

TEST(GpuConfigTest, OperationsUnderEitherNameAnyCase) {
  EXPECT_EQ(Parse({{"LOCKSTEP_GPU_OPERATIONS", "mpi"}}).gpu_operations, GpuOperations::kMpi);
  EXPECT_EQ(Parse({{"HOROVOD_GPU_OPERATIONS", "MPI"}}).gpu_operations, GpuOperations::kMpi);
  const Config nccl = Parse({{"HOROVOD_GPU_OPERATIONS", "NCCL"}});
  EXPECT_EQ(nccl.gpu_operations, GpuOperations::kNccl);
  EXPECT_TRUE(nccl.gpu_operations_set);
  // LOCKSTEP_ wins over the Horovod alias, as for every setting.
  EXPECT_EQ(Parse({{"LOCKSTEP_GPU_OPERATIONS", "nccl"}, {"HOROVOD_GPU_OPERATIONS", "mpi"}})
                .gpu_operations,
            GpuOperations::kNccl);
}

TEST(GpuConfigTest, OperationsLockstepLacksAreRefusedByName) {
  EXPECT_EQ(ErrorFor({{"HOROVOD_GPU_OPERATIONS", "GLOO"}}),
            "HOROVOD_GPU_OPERATIONS=\"GLOO\" is not supported by lockstep (it has nccl and mpi, "
            "not gloo)");
  EXPECT_EQ(ErrorFor({{"LOCKSTEP_GPU_OPERATIONS", "rccl"}}),
            "LOCKSTEP_GPU_OPERATIONS=\"rccl\" is not nccl or mpi");
  EXPECT_EQ(ErrorFor({{"LOCKSTEP_GPU_OPERATIONS", ""}}),
            "LOCKSTEP_GPU_OPERATIONS=\"\" is not nccl or mpi");
}

TEST(GpuConfigTest, FusionThresholdIsBytes) {
  EXPECT_EQ(Parse({{"LOCKSTEP_GPU_FUSION_THRESHOLD", "0"}}).gpu_fusion_threshold_bytes, 0);
  EXPECT_EQ(Parse({{"LOCKSTEP_GPU_FUSION_THRESHOLD", "67108864"}}).gpu_fusion_threshold_bytes,
            67108864);
  // Independent of the host's threshold.
  const Config both =
      Parse({{"LOCKSTEP_FUSION_THRESHOLD", "1024"}, {"LOCKSTEP_GPU_FUSION_THRESHOLD", "2048"}});
  EXPECT_EQ(both.fusion_threshold_bytes, 1024);
  EXPECT_EQ(both.gpu_fusion_threshold_bytes, 2048);
  for (const char* bad : {"-1", "1.5", "64MiB", "", "99999999999999999999"}) {
    EXPECT_EQ(ErrorFor({{"LOCKSTEP_GPU_FUSION_THRESHOLD", bad}}),
              std::string("LOCKSTEP_GPU_FUSION_THRESHOLD=\"") + bad +
                  "\" is not a whole number of bytes >= 0");
  }
}

TEST(GpuConfigTest, NcclTimeoutIsSecondsAndZeroTurnsItOff) {
  EXPECT_EQ(Parse({{"LOCKSTEP_NCCL_TIMEOUT_SECONDS", "0"}}).nccl_timeout_seconds, 0.0);
  EXPECT_EQ(Parse({{"LOCKSTEP_NCCL_TIMEOUT_SECONDS", "2.5"}}).nccl_timeout_seconds, 2.5);
  for (const char* bad : {"-1", "nan", "inf", "5s", ""}) {
    EXPECT_EQ(ErrorFor({{"LOCKSTEP_NCCL_TIMEOUT_SECONDS", bad}}),
              std::string("LOCKSTEP_NCCL_TIMEOUT_SECONDS=\"") + bad +
                  "\" is not a number of seconds >= 0");
  }
}

TEST(GpuConfigTest, DescribeMentionsTheGpuSettings) {
  const std::string text = Describe(Parse({{"LOCKSTEP_GPU_OPERATIONS", "mpi"},
                                           {"LOCKSTEP_GPU_FUSION_THRESHOLD", "4096"},
                                           {"LOCKSTEP_NCCL_TIMEOUT_SECONDS", "0"}}));
  for (const char* part :
       {"gpu_operations=mpi", "gpu_fusion_threshold=4096B", "nccl_timeout=never"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " missing from " << text;
  }
  EXPECT_NE(Describe(Config()).find("nccl_timeout=300s"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
