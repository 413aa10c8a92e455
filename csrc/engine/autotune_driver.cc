#include "engine/autotune_driver.h"

#include <sstream>
#include <stdexcept>

namespace lockstep {

AutotuneDriver::AutotuneDriver(const Config& config, const TunedSettings& initial,
                               bool shm_available, Communicator& comm, int rank,
                               const Logger& logger)
    : tuner_(config, initial, shm_available),
      comm_(comm),
      rank_(rank),
      logger_(logger),
      window_start_(std::chrono::steady_clock::now()) {
  if (rank_ == 0 && !config.autotune_log.empty()) {
    csv_.open(config.autotune_log, std::ios::out | std::ios::trunc);
    if (!csv_) throw std::runtime_error("cannot write the autotune log " + config.autotune_log);
    csv_ << Autotuner::CsvHeader() << '\n' << std::flush;
  }
}

std::optional<TunedSettings> AutotuneDriver::AfterCycle(int64_t bytes_moved) {
  if (!tuner_.AddCycle(bytes_moved)) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(now - window_start_).count();
  // The job is as fast as its slowest rank.
  seconds = comm_.MaxAcrossRanks(seconds);
  const TunedSettings before = tuner_.settings();
  Log(tuner_.EndWindow(seconds));
  window_start_ = std::chrono::steady_clock::now();
  if (tuner_.settings() == before) return std::nullopt;
  return tuner_.settings();
}

void AutotuneDriver::Log(const AutotuneWindow& window) {
  if (csv_.is_open()) csv_ << Autotuner::CsvRow(window) << '\n' << std::flush;
  if (tuner_.tuning()) return;
  if (csv_.is_open()) {  // the settings kept, as a last row without a measurement
    AutotuneWindow final_row;
    final_row.index = window.index + 1;
    final_row.phase = "final";
    final_row.settings = tuner_.settings();
    csv_ << Autotuner::CsvRow(final_row) << '\n' << std::flush;
  }
  if (logger_.Enabled(LogLevel::kInfo)) {
    const TunedSettings& s = tuner_.settings();
    std::ostringstream line;
    line << "autotune done after " << window.index + 1 << " windows: chunk=" << s.chunk_bytes
         << "B fusion_threshold=" << s.fusion_threshold_bytes << "B cycle_time=" << s.cycle_time_ms
         << "ms shm_allreduce=" << (s.shm_allreduce ? "on" : "off");
    logger_.Log(LogLevel::kInfo, line.str());
  }
}

}  // namespace lockstep
