// Complete slices in the timeline: phases whose times are known only afterwards (the
// GPU's, measured with CUDA events), written as Chrome-trace "X" events on the
// tensor's track, with times relative to the timeline's start.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "engine/timeline.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(TimelineSliceTest, WritesACompleteSliceWithItsStartAndDuration) {
  const std::string path = testing::TempDir() + "timeline_slices.json";
  Timeline timeline;
  const Clock::time_point before = Clock::now();
  timeline.Start(path, false);
  const Clock::time_point after = Clock::now();
  timeline.Slice("grad \"w\"", "NCCL_ALLREDUCE", after + std::chrono::milliseconds(2),
                 after + std::chrono::microseconds(2250));
  timeline.Stop();
  const std::string text = ReadFile(path);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(text, match,
                                std::regex(R"(\{"ph":"X","ts":(\d+),"pid":1,"tid":(\d+),)"
                                           R"("dur":(\d+),"name":"NCCL_ALLREDUCE"\})")))
      << text;
  const int64_t start_bound =
      std::chrono::duration_cast<std::chrono::microseconds>(after - before).count();
  EXPECT_GE(std::stoll(match[1]), 2000);
  EXPECT_LE(std::stoll(match[1]), 2000 + start_bound);
  EXPECT_EQ(match[3], "250");
  // On the tensor's own track, named (and escaped) as for its other phases.
  EXPECT_NE(text.find("\"tid\":" + match[2].str() +
                      ",\"name\":\"thread_name\",\"args\":{\"name\":\"grad \\\"w\\\"\"}"),
            std::string::npos)
      << text;
}

TEST(TimelineSliceTest, TimesBeforeTheStartAreClampedAndInactiveWritesNothing) {
  const std::string path = testing::TempDir() + "timeline_slices_clamped.json";
  Timeline timeline;
  timeline.Slice("t", "ignored", Clock::now(), Clock::now());  // not started: nothing
  timeline.Start(path, false);
  const Clock::time_point long_ago = Clock::now() - std::chrono::hours(1);
  timeline.Slice("t", "EARLY", long_ago, long_ago + std::chrono::microseconds(10));
  timeline.Stop();
  const std::string text = ReadFile(path);
  EXPECT_NE(text.find(R"({"ph":"X","ts":0,"pid":1,"tid":1,"dur":0,"name":"EARLY"})"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("ignored"), std::string::npos) << text;
}

}  // namespace
}  // namespace lockstep
