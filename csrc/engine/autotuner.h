// Online tuning of the settings that decide how fast a job's collectives run: chunk
// size, fusion threshold, cycle time and the shared-memory switch
// (LOCKSTEP_AUTOTUNE=1, as Horovod's HOROVOD_AUTOTUNE).
//
// The tuner measures throughput (bytes moved per second of wall time) over windows
// of cycles that executed collectives, tries each setting's candidates in turn with
// the others held at their best so far (coordinate search: a handful of trials, not
// a grid), and keeps the best. It is deterministic: windows end after the same
// cycles on every rank (every rank executes the same responses in every cycle), and
// the engine agrees on each window's duration across ranks (the slowest rank's)
// before handing it in, so every rank makes the same choices in the same cycle
// without any broadcast. Settings the user set explicitly are not tuned.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"

namespace lockstep {

struct TunedSettings {
  int64_t fusion_threshold_bytes = 0;
  int64_t chunk_bytes = 0;
  double cycle_time_ms = 0;
  bool shm_allreduce = false;

  bool operator==(const TunedSettings& other) const;
};

// One measured window, as logged.
struct AutotuneWindow {
  int index = 0;
  std::string phase;  // "warmup", the name of the setting on trial, or "final"
  TunedSettings settings;
  int64_t bytes = 0;
  double seconds = 0;
  double bytes_per_second = 0;
};

class Autotuner {
 public:
  // `initial`: the settings the job starts with. `shm_available`: the shared-memory
  // allreduce can run in this job, so its switch is worth trying.
  Autotuner(const Config& config, const TunedSettings& initial, bool shm_available);

  bool tuning() const { return tuning_; }
  const TunedSettings& settings() const { return settings_; }

  // After a cycle that executed collectives moving `bytes`. True when the current
  // window is complete: the caller then agrees on its duration and calls EndWindow.
  bool AddCycle(int64_t bytes);
  // `seconds`: the window's duration, identical on every rank. Moves to the next
  // trial (settings() may change) and returns the window's record.
  AutotuneWindow EndWindow(double seconds);

  // The CSV header and one row, for the trials log.
  static std::string CsvHeader();
  static std::string CsvRow(const AutotuneWindow& window);

 private:
  struct Dimension {
    std::string name;
    std::vector<double> candidates;
    double TunedSettings::*as_double = nullptr;  // exactly one of these three
    int64_t TunedSettings::*as_int = nullptr;
    bool TunedSettings::*as_bool = nullptr;
  };
  void AddDimensions(const Config& config, bool shm_available);
  void Apply(const Dimension& dimension, double value);
  void StartTrial();
  void FinishTrial(double score);

  TunedSettings settings_;
  std::vector<Dimension> dimensions_;
  int warmup_windows_left_;
  int cycles_per_window_;
  int windows_per_trial_ = 2;  // a trial scores its best window: noise only slows things down

  bool tuning_ = true;
  size_t dimension_ = 0;  // the setting on trial
  size_t candidate_ = 0;  // its value on trial
  int trial_windows_done_ = 0;
  double trial_score_ = 0;
  double best_score_ = -1;  // of the current dimension
  double best_value_ = 0;
  int cycles_in_window_ = 0;
  int64_t bytes_in_window_ = 0;
  int windows_ = 0;
};

}  // namespace lockstep
