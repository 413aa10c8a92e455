// The stall inspector: when rank 0 forces a negotiation round to look for stalls, the
// rate-limited warning it logs, which tensors it fails, and its disabled settings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "negotiation/stall_inspector.h"

namespace lockstep {
namespace {

using Clock = StallInspector::Clock;
using std::chrono::milliseconds;

Config StallConfig(double check_seconds, double shutdown_seconds) {
  Config config;
  config.stall_check_seconds = check_seconds;
  config.stall_shutdown_seconds = shutdown_seconds;
  return config;
}

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in: " << text;
}

class StallInspectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = std::tmpfile();
    ASSERT_NE(log_, nullptr);
  }
  void TearDown() override { std::fclose(log_); }

  std::string LogText() {
    std::fflush(log_);
    std::fseek(log_, 0, SEEK_SET);
    std::string text;
    char chunk[512];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof(chunk), log_)) > 0) text.append(chunk, n);
    std::fseek(log_, 0, SEEK_END);
    return text;
  }
  long LogLines() {
    std::string text = LogText();
    return static_cast<long>(std::count(text.begin(), text.end(), '\n'));
  }

  std::FILE* log_ = nullptr;
  const Clock::time_point t0_ = Clock::now();
};

TEST_F(StallInspectorTest, DueAfterTheCheckTimeAtMostOncePerSecond) {
  Logger logger(LogLevel::kWarning, 0, log_);
  StallInspector inspector(StallConfig(2, 0), logger);
  EXPECT_FALSE(inspector.Due(1.9, t0_));
  EXPECT_TRUE(inspector.Due(2.0, t0_));
  EXPECT_FALSE(inspector.Due(5.0, t0_ + milliseconds(500)));
  EXPECT_FALSE(inspector.Due(5.0, t0_ + milliseconds(999)));
  EXPECT_TRUE(inspector.Due(5.0, t0_ + milliseconds(1000)));
  EXPECT_FALSE(inspector.Due(5.0, t0_ + milliseconds(1500)));
  EXPECT_FALSE(inspector.Due(1.0, t0_ + milliseconds(5000)));  // nothing old enough
  EXPECT_TRUE(inspector.Due(5.0, t0_ + milliseconds(5000)));
}

TEST_F(StallInspectorTest, ShorterShutdownTimeSetsThresholdAndRate) {
  Logger logger(LogLevel::kWarning, 0, log_);
  StallInspector inspector(StallConfig(60, 0.5), logger);
  EXPECT_FALSE(inspector.Due(0.4, t0_));
  EXPECT_TRUE(inspector.Due(0.5, t0_));
  EXPECT_FALSE(inspector.Due(1.0, t0_ + milliseconds(400)));
  EXPECT_TRUE(inspector.Due(1.0, t0_ + milliseconds(500)));
}

TEST_F(StallInspectorTest, WarningNamesTensorsAndMissingRanks) {
  Logger logger(LogLevel::kWarning, 0, log_);
  StallInspector inspector(StallConfig(2, 0), logger);
  EXPECT_TRUE(inspector.Inspect({{"young", {1}, 1.0}}, t0_).empty());
  EXPECT_EQ(LogText(), "");

  const std::vector<WaitingTensor> waiting = {
      {"a", {1, 3}, 3.0}, {"b", {0}, 2.5}, {"young", {2}, 1.0}};
  EXPECT_TRUE(inspector.Inspect(waiting, t0_).empty());  // no shutdown time: nothing fails
  const std::string text = LogText();
  EXPECT_EQ(LogLines(), 1);
  EXPECT_TRUE(Contains(text, "[lockstep rank 0] warning: Stall: 2 tensor(s)"));
  EXPECT_TRUE(Contains(text, "'a' (missing ranks: 1 3); 'b' (missing ranks: 0)"));
  EXPECT_FALSE(Contains(text, "young"));
  EXPECT_FALSE(Contains(text, "will fail"));
}

TEST_F(StallInspectorTest, WarnsAtMostOncePerCheckInterval) {
  Logger logger(LogLevel::kWarning, 0, log_);
  StallInspector inspector(StallConfig(2, 0), logger);
  const std::vector<WaitingTensor> waiting = {{"a", {1}, 10.0}};
  inspector.Inspect(waiting, t0_);
  EXPECT_EQ(LogLines(), 1);
  inspector.Inspect(waiting, t0_ + milliseconds(1000));
  inspector.Inspect(waiting, t0_ + milliseconds(1999));
  EXPECT_EQ(LogLines(), 1);
  inspector.Inspect(waiting, t0_ + milliseconds(2000));
  EXPECT_EQ(LogLines(), 2);
  inspector.Inspect(waiting, t0_ + milliseconds(3000));
  EXPECT_EQ(LogLines(), 2);
}

TEST_F(StallInspectorTest, FailsTensorsPastTheShutdownTime) {
  Logger logger(LogLevel::kWarning, 0, log_);
  StallInspector inspector(StallConfig(2, 5), logger);
  std::vector<WaitingTensor> failed =
      inspector.Inspect({{"old", {1, 2}, 6.0}, {"edge", {3}, 5.0}, {"mid", {0}, 3.0}}, t0_);
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].name, "old");
  EXPECT_EQ(failed[0].missing_ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(failed[1].name, "edge");
  EXPECT_EQ(failed[1].missing_ranks, (std::vector<int>{3}));
  const std::string text = LogText();
  EXPECT_TRUE(Contains(text, "Stall: 3 tensor(s)"));
  EXPECT_TRUE(Contains(text, "They will fail after 5 s."));
}

TEST_F(StallInspectorTest, DisabledCheckNeitherWarnsNorForcesRounds) {
  Logger logger(LogLevel::kWarning, 0, log_);
  Config disabled = StallConfig(60, 0);
  disabled.stall_check_disabled = true;
  for (const Config& config : {disabled, StallConfig(0, 0)}) {
    StallInspector inspector(config, logger);
    EXPECT_FALSE(inspector.Due(1e9, t0_));
    EXPECT_TRUE(inspector.Inspect({{"a", {1}, 1e9}}, t0_).empty());
  }
  EXPECT_EQ(LogText(), "");
}

TEST_F(StallInspectorTest, ShutdownWorksWithWarningsDisabled) {
  Logger logger(LogLevel::kWarning, 0, log_);
  Config config = StallConfig(1, 3);
  config.stall_check_disabled = true;
  StallInspector inspector(config, logger);
  EXPECT_FALSE(inspector.Due(2.9, t0_));
  EXPECT_TRUE(inspector.Due(3.0, t0_));
  std::vector<WaitingTensor> failed = inspector.Inspect({{"a", {1}, 3.0}}, t0_);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].name, "a");
  EXPECT_EQ(LogText(), "");
}

TEST_F(StallInspectorTest, WarningRespectsTheLoggerLevel) {
  Logger quiet(LogLevel::kError, 0, log_);
  StallInspector inspector(StallConfig(1, 0), quiet);
  inspector.Inspect({{"a", {1}, 5.0}}, t0_);
  EXPECT_EQ(LogText(), "");
}

}  // namespace
}  // namespace lockstep
