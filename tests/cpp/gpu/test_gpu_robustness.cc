// The GPU backend's failure handling where it needs CUDA: launch checks that are not
// fooled by errors earlier calls left behind, done events that refuse to order a
// stream once their collective failed, and the NCCL entry points the nonblocking
// setup and the revoke need. The tests that need a GPU skip without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <iostream>
#include <memory>
#include <string>

#include "backends/gpu_collectives.h"
#include "backends/nccl/batched_copy.h"
#include "backends/nccl/device_buffers.h"
#include "backends/nccl/device_context.h"
#include "backends/nccl/gpu_probe.h"
#include "backends/nccl/nccl_library.h"
#include "backends/nccl/scale_kernels.h"

namespace lockstep {
namespace {

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    const GpuProbe probe = ProbeGpus();                                       \
    if (probe.devices == 0) GTEST_SKIP() << "needs a GPU: " << probe.problem; \
  } while (0)

TEST(GpuRobustnessTest, TheLoadedNcclHasTheNonblockingSetup) {
  const NcclLibrary& nccl = LoadNcclLibrary();
  if (!nccl.loaded) GTEST_SKIP() << nccl.load_error;
  EXPECT_NE(nccl.CommInitRankConfig, nullptr);
  // The revoke is optional and taken only from 2.29 on: 2.28 exports it, but revoking
  // then destroying crashed there (nccl_library.cc).
  if (nccl.version < kFirstRevokingNccl) {
    EXPECT_EQ(nccl.CommRevoke, nullptr) << nccl.version;
  }
  std::cout << "NCCL " << nccl.version << " from " << nccl.path
            << (nccl.CommRevoke ? ": has ncclCommRevoke" : ": no ncclCommRevoke") << "\n";
}

TEST(GpuRobustnessTest, ALaunchIsNotBlamedForAnEarlierDiscardedError) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  float* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 1024 * sizeof(float)), cudaSuccess);
  // A failed call inside liblockstep (its own static CUDA runtime, whose error state
  // the launches read) leaves an error behind: an impossible allocation.
  auto stream = std::make_shared<DeviceStream>(0);
  DeviceScratch scratch(stream);
  EXPECT_THROW(scratch.Get(int64_t{1} << 52, {"huge"}), Error);
  EXPECT_EQ(ScaleDeviceBuffer(data, 1024, DataType::kFloat32, 0.5, stream->get()), cudaSuccess);
  EXPECT_THROW(scratch.Get(int64_t{1} << 52, {"huge"}), Error);
  DeviceCopy copy{data, data + 512, 512 * sizeof(float)};
  EXPECT_EQ(BatchedCopy(&copy, 1, DataType::kFloat32, 2.0, stream->get()), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(data);
}

TEST(GpuRobustnessTest, AFailedDoneEventRefusesToOrderAStream) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  auto good = std::make_shared<GpuEvent>(0, AcquireEvent(0), consumer, 0);
  ASSERT_EQ(cudaEventRecord(good->get(), consumer), cudaSuccess);
  EXPECT_NO_THROW(GpuStreamWaitDone(*good, consumer));
  auto failed = std::make_shared<GpuEvent>(0, AcquireEvent(0), consumer, 0);
  failed->Fail("the collective timed out");
  try {
    GpuStreamWaitDone(*failed, consumer);
    FAIL() << "a stream was ordered after a collective that never finished";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the collective timed out"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("undefined"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  cudaStreamDestroy(consumer);
}

}  // namespace
}  // namespace lockstep
