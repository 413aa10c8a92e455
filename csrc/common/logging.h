// Leveled logging to stderr. A Logger is handed to the objects that log, so the
// level and rank travel with them instead of living in a global.
#pragma once

#include <cstdio>
#include <string>

#include "common/config.h"

namespace lockstep {

class Logger {
 public:
  // `sink` is stderr in production; tests pass a temporary file.
  Logger(LogLevel level, int rank, std::FILE* sink = stderr);

  bool Enabled(LogLevel level) const { return level >= level_; }
  // Writes "[lockstep rank N] level: message" as one line. Logging at kFatal does
  // not abort: the caller decides how to fail, the library never kills the process.
  void Log(LogLevel level, const std::string& message) const;

  LogLevel level() const { return level_; }
  int rank() const { return rank_; }

 private:
  LogLevel level_;
  int rank_;
  std::FILE* sink_;
};

}  // namespace lockstep
