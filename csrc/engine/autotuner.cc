#include "engine/autotuner.h"

#include <algorithm>
#include <sstream>

namespace lockstep {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

bool TunedSettings::operator==(const TunedSettings& other) const {
  return fusion_threshold_bytes == other.fusion_threshold_bytes &&
         chunk_bytes == other.chunk_bytes && cycle_time_ms == other.cycle_time_ms &&
         shm_allreduce == other.shm_allreduce;
}

Autotuner::Autotuner(const Config& config, const TunedSettings& initial, bool shm_available)
    : settings_(initial),
      warmup_windows_left_(config.autotune_warmup_windows),
      cycles_per_window_(std::max(1, config.autotune_cycles_per_window)) {
  AddDimensions(config, shm_available);
  tuning_ = !dimensions_.empty();
  if (tuning_ && warmup_windows_left_ == 0) StartTrial();
}

void Autotuner::AddDimensions(const Config& config, bool shm_available) {
  // Candidates span what was measured to matter: chunks that fit a core's cache up
  // to ones that leave MPI's own pipelining to it, fusion from a few buffers to all,
  // cycles from eager to patient. The user's own settings stay fixed.
  if (!config.chunk_bytes_set) {
    dimensions_.push_back({"chunk_bytes",
                           {0.25 * kMiB, 1 * kMiB, 4 * kMiB, 16 * kMiB},
                           nullptr,
                           &TunedSettings::chunk_bytes,
                           nullptr});
  }
  if (!config.fusion_threshold_set) {
    dimensions_.push_back({"fusion_threshold",
                           {4 * kMiB, 16 * kMiB, 64 * kMiB, 128 * kMiB},
                           nullptr,
                           &TunedSettings::fusion_threshold_bytes,
                           nullptr});
  }
  if (!config.cycle_time_set) {
    dimensions_.push_back(
        {"cycle_time_ms", {0.5, 1, 2.5, 5}, &TunedSettings::cycle_time_ms, nullptr, nullptr});
  }
  if (shm_available && !config.shm_allreduce_set) {
    dimensions_.push_back(
        {"shm_allreduce", {1, 0}, nullptr, nullptr, &TunedSettings::shm_allreduce});
  }
}

void Autotuner::Apply(const Dimension& dimension, double value) {
  if (dimension.as_double) settings_.*dimension.as_double = value;
  if (dimension.as_int) settings_.*dimension.as_int = static_cast<int64_t>(value);
  if (dimension.as_bool) settings_.*dimension.as_bool = value != 0;
}

bool Autotuner::AddCycle(int64_t bytes) {
  if (!tuning_) return false;
  ++cycles_in_window_;
  bytes_in_window_ += bytes;
  return cycles_in_window_ >= cycles_per_window_;
}

AutotuneWindow Autotuner::EndWindow(double seconds) {
  AutotuneWindow window;
  window.index = windows_++;
  window.phase = warmup_windows_left_ > 0 ? "warmup" : dimensions_[dimension_].name;
  window.settings = settings_;
  window.bytes = bytes_in_window_;
  window.seconds = seconds;
  window.bytes_per_second = seconds > 0 ? static_cast<double>(bytes_in_window_) / seconds : 0;
  cycles_in_window_ = 0;
  bytes_in_window_ = 0;
  if (warmup_windows_left_ > 0) {
    if (--warmup_windows_left_ == 0) StartTrial();
    return window;
  }
  trial_score_ = std::max(trial_score_, window.bytes_per_second);
  if (++trial_windows_done_ == windows_per_trial_) FinishTrial(trial_score_);
  return window;
}

void Autotuner::StartTrial() {
  const Dimension& dimension = dimensions_[dimension_];
  Apply(dimension, dimension.candidates[candidate_]);
  trial_windows_done_ = 0;
  trial_score_ = 0;
}

void Autotuner::FinishTrial(double score) {
  const Dimension& dimension = dimensions_[dimension_];
  if (score > best_score_) {
    best_score_ = score;
    best_value_ = dimension.candidates[candidate_];
  }
  if (++candidate_ < dimension.candidates.size()) {
    StartTrial();
    return;
  }
  Apply(dimension, best_value_);  // later dimensions are tried around the best so far
  candidate_ = 0;
  best_score_ = -1;
  if (++dimension_ < dimensions_.size()) {
    StartTrial();
  } else {
    tuning_ = false;
  }
}

std::string Autotuner::CsvHeader() {
  return "window,phase,chunk_bytes,fusion_threshold_bytes,cycle_time_ms,shm_allreduce,bytes,"
         "seconds,bytes_per_second";
}

std::string Autotuner::CsvRow(const AutotuneWindow& window) {
  std::ostringstream row;
  const TunedSettings& s = window.settings;
  row << window.index << ',' << window.phase << ',' << s.chunk_bytes << ','
      << s.fusion_threshold_bytes << ',' << s.cycle_time_ms << ',' << (s.shm_allreduce ? 1 : 0)
      << ',' << window.bytes << ',' << window.seconds << ',' << window.bytes_per_second;
  return row.str();
}

}  // namespace lockstep
