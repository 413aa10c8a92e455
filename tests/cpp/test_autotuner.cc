// The autotuner's search: warm-up windows are discarded, each setting's candidates
// are tried in turn with the others at their best so far, the best is kept, and the
// user's own settings are never touched. Scores are fed in directly, so the choices
// are exact.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/autotuner.h"

namespace lockstep {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

Config TuningConfig(int warmup, int cycles) {
  Config config;
  config.autotune = true;
  config.autotune_warmup_windows = warmup;
  config.autotune_cycles_per_window = cycles;
  return config;
}

TunedSettings Defaults() { return TunedSettings{128 * kMiB, 1 * kMiB, 1.0, false}; }

// Completes one window of `cycles` cycles; `seconds_for` maps the settings on trial to
// the window's duration (moving 1 MiB per cycle).
AutotuneWindow RunWindow(Autotuner& tuner, int cycles, double seconds) {
  for (int i = 0; i + 1 < cycles; ++i) EXPECT_FALSE(tuner.AddCycle(kMiB));
  EXPECT_TRUE(tuner.AddCycle(kMiB));
  return tuner.EndWindow(seconds);
}

TEST(Autotuner, WindowsCloseAfterTheConfiguredCycles) {
  Autotuner tuner(TuningConfig(1, 3), Defaults(), false);
  AutotuneWindow window = RunWindow(tuner, 3, 0.5);
  EXPECT_EQ(window.phase, "warmup");
  EXPECT_EQ(window.bytes, 3 * kMiB);
  EXPECT_DOUBLE_EQ(window.bytes_per_second, 6.0 * kMiB);
  EXPECT_EQ(window.settings, Defaults());  // warm-up runs the starting settings
}

TEST(Autotuner, KeepsTheFastestCandidateOfEverySetting) {
  Autotuner tuner(TuningConfig(2, 1), Defaults(), /*shm_available=*/true);
  // The fastest values: 4 MiB chunks, 16 MiB fusion, 2.5 ms cycles, shared memory off.
  auto seconds_for = [](const TunedSettings& s) {
    double seconds = 1.0;
    if (s.chunk_bytes == 4 * kMiB) seconds -= 0.4;
    if (s.fusion_threshold_bytes == 16 * kMiB) seconds -= 0.2;
    if (s.cycle_time_ms == 2.5) seconds -= 0.1;
    if (!s.shm_allreduce) seconds -= 0.05;
    return seconds;
  };
  std::map<std::string, std::set<double>> tried;
  int windows = 0;
  while (tuner.tuning()) {
    ASSERT_LT(++windows, 100) << "the search must end";
    const TunedSettings on_trial = tuner.settings();
    AutotuneWindow window = RunWindow(tuner, 1, seconds_for(on_trial));
    if (window.phase == "chunk_bytes") tried["chunk"].insert(on_trial.chunk_bytes);
    if (window.phase == "fusion_threshold") {
      EXPECT_EQ(on_trial.chunk_bytes, 4 * kMiB) << "later settings are tried around the best";
      tried["fusion"].insert(on_trial.fusion_threshold_bytes);
    }
  }
  // 2 warm-up windows, then 2 windows for each of 4 + 4 + 4 + 2 candidates.
  EXPECT_EQ(windows, 2 + 2 * 14);
  EXPECT_EQ(tried["chunk"].size(), 4u);
  EXPECT_EQ(tried["fusion"].size(), 4u);
  EXPECT_EQ(tuner.settings(), (TunedSettings{16 * kMiB, 4 * kMiB, 2.5, false}));
}

TEST(Autotuner, ATrialScoresItsBestWindow) {
  Config config = TuningConfig(0, 1);
  config.fusion_threshold_set = config.cycle_time_set = true;  // only the chunk size
  Autotuner tuner(config, Defaults(), false);
  // 256 KiB: one slow (disturbed) window and one fast one; it still wins.
  const std::map<int64_t, std::pair<double, double>> seconds = {
      {kMiB / 4, {5.0, 0.1}}, {kMiB, {0.5, 0.5}}, {4 * kMiB, {0.4, 0.4}}, {16 * kMiB, {0.3, 0.3}}};
  while (tuner.tuning()) {
    const auto& pair = seconds.at(tuner.settings().chunk_bytes);
    RunWindow(tuner, 1, pair.first);
    RunWindow(tuner, 1, pair.second);
  }
  EXPECT_EQ(tuner.settings().chunk_bytes, kMiB / 4);
}

TEST(Autotuner, SettingsTheUserChoseStayFixed) {
  Config config = TuningConfig(0, 1);
  config.chunk_bytes_set = config.fusion_threshold_set = config.cycle_time_set = true;
  config.shm_allreduce_set = true;
  Autotuner tuner(config, Defaults(), true);
  EXPECT_FALSE(tuner.tuning());
  EXPECT_FALSE(tuner.AddCycle(kMiB));
  EXPECT_EQ(tuner.settings(), Defaults());
}

TEST(Autotuner, SharedMemoryIsTriedOnlyWhereAvailable) {
  Config config = TuningConfig(0, 1);
  config.chunk_bytes_set = config.fusion_threshold_set = config.cycle_time_set = true;
  Autotuner without(config, Defaults(), false);
  EXPECT_FALSE(without.tuning());
  Autotuner with(config, Defaults(), true);
  ASSERT_TRUE(with.tuning());
  EXPECT_TRUE(with.settings().shm_allreduce);  // the first candidate: on
  RunWindow(with, 1, 1.0);
  RunWindow(with, 1, 1.0);
  EXPECT_FALSE(with.settings().shm_allreduce);
  RunWindow(with, 1, 2.0);
  RunWindow(with, 1, 2.0);
  EXPECT_FALSE(with.tuning());
  EXPECT_TRUE(with.settings().shm_allreduce);  // on was faster
}

TEST(Autotuner, CsvRowsMatchTheHeader) {
  AutotuneWindow window;
  window.index = 7;
  window.phase = "cycle_time_ms";
  window.settings = Defaults();
  window.bytes = 10;
  window.seconds = 0.5;
  window.bytes_per_second = 20;
  EXPECT_EQ(Autotuner::CsvHeader(),
            "window,phase,chunk_bytes,fusion_threshold_bytes,cycle_time_ms,shm_allreduce,bytes,"
            "seconds,bytes_per_second");
  EXPECT_EQ(Autotuner::CsvRow(window), "7,cycle_time_ms,1048576,134217728,1,0,10,0.5,20");
}

}  // namespace
}  // namespace lockstep
