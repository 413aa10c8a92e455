// Which waits a response costs the background thread: one per producer stream (its
// latest ready event covers the earlier ones) and one done-event wait per distinct op
// stream, however many tensors a fused response holds. Pure bookkeeping, no GPU: the
// events here are never recorded.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backends/nccl/device_context.h"

namespace lockstep {
namespace {

cudaStream_t Stream(uintptr_t id) { return reinterpret_cast<cudaStream_t>(id); }

TEST(StreamWaitsTest, OneReadyWaitPerProducerStreamOnItsLatestEvent) {
  // Numbered as recorded: stream A's events 1, 4, 3; stream B's 2; the legacy stream's 5.
  std::vector<std::unique_ptr<GpuEvent>> events;
  for (auto [stream, sequence] : std::vector<std::pair<uintptr_t, uint64_t>>{
           {0xA0, 1}, {0xB0, 2}, {0xA0, 4}, {0xA0, 3}, {0, 5}}) {
    events.push_back(std::make_unique<GpuEvent>(0, nullptr, Stream(stream), sequence));
  }
  std::vector<OpSpec> specs(events.size() + 1);
  std::vector<LocalTensor> tensors;
  for (size_t i = 0; i < events.size(); ++i) tensors.push_back({&specs[i], events[i].get()});
  tensors.push_back({&specs.back(), nullptr});  // a tensor without a ready event
  tensors.push_back({nullptr, nullptr});        // a joined rank's slot
  const std::vector<const GpuEvent*> waits = LatestReadyPerStream(tensors);
  ASSERT_EQ(waits.size(), 3u);
  EXPECT_EQ(waits[0], events[2].get());  // stream A: number 4
  EXPECT_EQ(waits[1], events[1].get());  // stream B
  EXPECT_EQ(waits[2], events[4].get());  // the legacy default stream is a stream too
}

TEST(StreamWaitsTest, OneDoneWaitPerDistinctOpStream) {
  std::vector<OpSpec> specs(5);
  specs[0].stream = Stream(0xA0);
  specs[1].stream = Stream(0xB0);
  specs[2].stream = Stream(0xA0);
  specs[3].stream = nullptr;
  specs[4].stream = nullptr;
  std::vector<LocalTensor> tensors;
  for (OpSpec& spec : specs) tensors.push_back({&spec, nullptr});
  tensors.push_back({nullptr, nullptr});
  EXPECT_EQ(DistinctOpStreams(tensors),
            (std::vector<cudaStream_t>{Stream(0xA0), Stream(0xB0), nullptr}));
  EXPECT_TRUE(DistinctOpStreams({}).empty());
}

}  // namespace
}  // namespace lockstep
