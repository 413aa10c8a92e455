// Where no GPU can run (no driver, no device), the GPU backend says so clearly: GPU
// tensors are refused at submission with the reason, and recording a GPU op's ready
// event fails naming CUDA. Skipped where a GPU is usable. (Making the GPU collectives
// is collective over MPI, which this binary does not start; submission refuses GPU
// tensors before they could be made.) Also the one-GPU-per-process rule, which needs
// no device.
#include <gtest/gtest.h>

#include <string>

#include "backends/gpu_collectives.h"
#include "backends/nccl/device_context.h"
#include "backends/nccl/gpu_probe.h"

namespace lockstep {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

OpSpec GpuSpec(int device) {
  OpSpec spec;
  spec.name = "grad";
  spec.device = device;
  spec.shape = {4};
  return spec;
}

TEST(GpuUnavailableTest, GpuTensorsAreRefusedWithTheReason) {
  const GpuProbe probe = ProbeGpus();
  if (probe.devices > 0) GTEST_SKIP() << "a GPU is usable here";
  ASSERT_FALSE(probe.problem.empty());
  EXPECT_EQ(GpuUnavailableReason(Config()), probe.problem);
  Config mpi;
  mpi.gpu_operations = GpuOperations::kMpi;
  mpi.gpu_operations_set = true;
  EXPECT_EQ(GpuUnavailableReason(mpi), probe.problem);  // staging needs CUDA too
}

TEST(GpuUnavailableTest, ARecordedReadyEventFailsNamingCuda) {
  if (ProbeGpus().devices > 0) GTEST_SKIP() << "a GPU is usable here";
  try {
    RecordGpuInputReady(GpuSpec(0));
    FAIL() << "a ready event was recorded without a GPU";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "allreduce of tensor 'grad': cannot record its ready event "
                         "on GPU 0"))
        << e.what();
    // The first call that failed is named (making the device current), not a later one.
    EXPECT_TRUE(Contains(e.what(), "CUDA cudaSetDevice failed: cudaError")) << e.what();
  }
}

TEST(GpuBindingTest, AProcessDrivesOneGpu) {
  const int bound = BindGpu(BoundGpu() >= 0 ? BoundGpu() : 3, GpuSpec(3));
  EXPECT_EQ(BoundGpuDevice(), bound);
  EXPECT_EQ(BindGpu(bound, GpuSpec(bound)), bound);  // the same GPU again is fine
  const int other = bound + 1;
  try {
    BindGpu(other, GpuSpec(other));
    FAIL() << "a second GPU was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::Code::kInvalidArgument);
    const std::string text = e.what();
    EXPECT_TRUE(Contains(text, "tensor 'grad': the tensor is on GPU " + std::to_string(other) +
                                   ", but this process runs its GPU collectives on GPU " +
                                   std::to_string(bound)))
        << text;
    EXPECT_TRUE(Contains(text, "one process per GPU")) << text;
  }
  EXPECT_EQ(BoundGpuDevice(), bound);
}

}  // namespace
}  // namespace lockstep
