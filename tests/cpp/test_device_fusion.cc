// GPU fusion planning, which needs no device: which GPU allreduces share the device
// fusion buffer (their own threshold, big tensors alone, never mixed with host ones),
// where each tensor sits in it, and how the copies are batched into launches.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/device_layout.h"
#include "fusion/fusion_buffer.h"

namespace lockstep {
namespace {

Response Allreduce(const std::string& name, int64_t floats, int32_t device) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.dtype = DataType::kFloat32;
  r.reduce_op = ReduceOp::kSum;
  r.device = device;
  r.names = {name};
  r.sizes = {floats};
  r.shape = {floats};
  return r;
}

using Names = std::vector<std::vector<std::string>>;

Names NamesOf(const std::vector<Response>& responses) {
  Names names;
  for (const Response& r : responses) names.push_back(r.names);
  return names;
}

TEST(DeviceFusionLayoutTest, EachTensorStartsOnTheAlignmentAndTheTotalEndsAtTheLast) {
  // 4 B, 100 B, 0 B, 64 B, 8 B.
  const DeviceFusionLayout layout = PlanDeviceFusion({4, 100, 0, 64, 8});
  EXPECT_EQ(layout.offsets, (std::vector<int64_t>{0, 64, 192, 192, 256}));
  EXPECT_EQ(layout.total_bytes, 264);
  for (int64_t offset : layout.offsets) EXPECT_EQ(offset % kDeviceFusionAlignment, 0);
  // Every element size divides the alignment, so offsets and total are whole elements.
  for (int64_t element : {1, 2, 4, 8}) EXPECT_EQ(kDeviceFusionAlignment % element, 0);
  ASSERT_EQ(layout.launches.size(), 1u);
  EXPECT_EQ(layout.launches[0], std::make_pair(0, 5));
}

TEST(DeviceFusionLayoutTest, TensorsNeverOverlap) {
  const std::vector<int64_t> bytes = {6, 2, 130, 64, 1, 1, 1000, 24};
  const DeviceFusionLayout layout = PlanDeviceFusion(bytes);
  for (size_t i = 1; i < bytes.size(); ++i) {
    EXPECT_GE(layout.offsets[i], layout.offsets[i - 1] + bytes[i - 1]) << i;
    EXPECT_LT(layout.offsets[i] - (layout.offsets[i - 1] + bytes[i - 1]), kDeviceFusionAlignment);
  }
  EXPECT_EQ(layout.total_bytes, layout.offsets.back() + bytes.back());
}

TEST(DeviceFusionLayoutTest, CopiesAreBatchedIntoLaunchesOfAtMostTheLimit) {
  const std::vector<int64_t> bytes(2 * kMaxCopiesPerLaunch + 88, 4);
  const DeviceFusionLayout layout = PlanDeviceFusion(bytes);
  const std::vector<std::pair<int, int>> expected = {
      {0, kMaxCopiesPerLaunch},
      {kMaxCopiesPerLaunch, 2 * kMaxCopiesPerLaunch},
      {2 * kMaxCopiesPerLaunch, 2 * kMaxCopiesPerLaunch + 88}};
  EXPECT_EQ(layout.launches, expected);
  EXPECT_EQ(layout.total_bytes, static_cast<int64_t>(bytes.size() - 1) * 64 + 4);
}

TEST(DeviceFusionLayoutTest, NothingToLayOut) {
  const DeviceFusionLayout layout = PlanDeviceFusion({});
  EXPECT_TRUE(layout.offsets.empty());
  EXPECT_EQ(layout.total_bytes, 0);
  EXPECT_TRUE(layout.launches.empty());
}

TEST(DeviceFusionPlanTest, GpuResponsesUseTheGpuThreshold) {
  // 80-byte tensors: two exceed the host's 100-byte threshold but fit the GPU's 1000.
  std::vector<Response> responses;
  for (int i = 0; i < 3; ++i) responses.push_back(Allreduce("host" + std::to_string(i), 20, -1));
  for (int i = 0; i < 3; ++i) responses.push_back(Allreduce("gpu" + std::to_string(i), 20, 0));
  const auto planned = PlanFusion(responses, FusionLimits{100, 0}, FusionLimits{1000, 0});
  EXPECT_EQ(NamesOf(planned), (Names{{"host0"}, {"host1"}, {"host2"}, {"gpu0", "gpu1", "gpu2"}}));
}

TEST(DeviceFusionPlanTest, HostAndGpuTensorsNeverShareABuffer) {
  const std::vector<Response> responses = {Allreduce("a", 4, -1), Allreduce("b", 4, 0),
                                           Allreduce("c", 4, -1), Allreduce("d", 4, 0)};
  const auto planned = PlanFusion(responses, FusionLimits{1 << 20, 0}, FusionLimits{1 << 20, 0});
  EXPECT_EQ(NamesOf(planned), (Names{{"a", "c"}, {"b", "d"}}));
  EXPECT_EQ(planned[0].device, -1);
  EXPECT_EQ(planned[1].device, 0);
}

TEST(DeviceFusionPlanTest, BigGpuTensorsGoToNcclAlone) {
  const int64_t big_floats = kDeviceStandaloneBytes / 4;
  const std::vector<Response> responses = {
      Allreduce("small0", 16, 0), Allreduce("big", big_floats, 0), Allreduce("small1", 16, 0)};
  const auto planned = PlanFusion(responses, FusionLimits{1 << 20, 0},
                                  FusionLimits{int64_t{128} << 20, kDeviceStandaloneBytes});
  EXPECT_EQ(NamesOf(planned), (Names{{"small0", "small1"}, {"big"}}));
}

TEST(DeviceFusionPlanTest, GpuThresholdSplitsBinsAndZeroTurnsGpuFusionOff) {
  std::vector<Response> responses;
  for (int i = 0; i < 5; ++i) responses.push_back(Allreduce("g" + std::to_string(i), 25, 0));
  // 100 bytes each, 250-byte bins: two per bin.
  EXPECT_EQ(NamesOf(PlanFusion(responses, FusionLimits{1 << 20, 0}, FusionLimits{250, 0})),
            (Names{{"g0", "g1"}, {"g2", "g3"}, {"g4"}}));
  EXPECT_EQ(NamesOf(PlanFusion(responses, FusionLimits{1 << 20, 0}, FusionLimits{0, 0})),
            (Names{{"g0"}, {"g1"}, {"g2"}, {"g3"}, {"g4"}}));
  // And the host still fuses when only GPU fusion is off.
  const std::vector<Response> host = {Allreduce("h0", 4, -1), Allreduce("h1", 4, -1)};
  EXPECT_EQ(NamesOf(PlanFusion(host, FusionLimits{1 << 20, 0}, FusionLimits{0, 0})),
            (Names{{"h0", "h1"}}));
}

}  // namespace
}  // namespace lockstep
