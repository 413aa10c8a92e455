// Runs the Autotuner inside the background loop: times its windows, agrees on each
// window's duration across ranks (the slowest rank's, so every rank's tuner makes the
// same choice in the same cycle), and logs the windows as CSV on rank 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>

#include "backends/communicator.h"
#include "common/config.h"
#include "common/logging.h"
#include "engine/autotuner.h"

namespace lockstep {

class AutotuneDriver {
 public:
  AutotuneDriver(const Config& config, const TunedSettings& initial, bool shm_available,
                 Communicator& comm, int rank, const Logger& logger);

  bool tuning() const { return tuner_.tuning(); }
  const TunedSettings& settings() const { return tuner_.settings(); }

  // After a cycle that executed collectives moving `bytes_moved`; every rank calls it
  // after the same cycles. Returns the settings to run with when they changed.
  std::optional<TunedSettings> AfterCycle(int64_t bytes_moved);

 private:
  void Log(const AutotuneWindow& window);

  Autotuner tuner_;
  Communicator& comm_;
  int rank_;
  const Logger& logger_;
  std::chrono::steady_clock::time_point window_start_;
  std::ofstream csv_;
};

}  // namespace lockstep
