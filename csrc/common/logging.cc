#include "common/logging.h"

namespace lockstep {

Logger::Logger(LogLevel level, int rank, std::FILE* sink)
    : level_(level), rank_(rank), sink_(sink) {}

void Logger::Log(LogLevel level, const std::string& message) const {
  if (!Enabled(level)) return;
  std::string line = "[lockstep rank " + std::to_string(rank_) + "] " + LogLevelName(level) + ": " +
                     message + "\n";
  // One fwrite per line: stdio locks the stream for the call, so lines from
  // different threads never interleave.
  std::fwrite(line.data(), 1, line.size(), sink_);
  std::fflush(sink_);
}

}  // namespace lockstep
