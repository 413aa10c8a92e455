#include "common/config.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>
#include <system_error>

namespace lockstep {
namespace {

using Lookup = std::function<const char*(const char*)>;

// A variable that is set, under whichever name was found.
struct Setting {
  std::string name;
  std::string value;
};

std::optional<Setting> FindSetting(const Lookup& lookup, const std::string& suffix) {
  // LOCKSTEP_ first, so a job can override tuning inherited from Horovod scripts.
  for (const char* prefix : {"LOCKSTEP_", "HOROVOD_"}) {
    std::string name = prefix + suffix;
    if (const char* value = lookup(name.c_str())) return Setting{name, value};
  }
  return std::nullopt;
}

[[noreturn]] void Reject(const Setting& setting, const std::string& expected) {
  throw ConfigError(setting.name + "=\"" + setting.value + "\" is not " + expected);
}

std::string ToLower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// from_chars: no whitespace, no leading '+', no locale, and overflow is reported.
template <typename T>
std::optional<T> ParseWhole(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<double> ParseFinite(const std::string& text) {
  std::optional<double> value = ParseWhole<double>(text);
  if (!value || !std::isfinite(*value)) return std::nullopt;
  return value;
}

int64_t ReadInteger(const Setting& setting, int64_t max, const std::string& expected) {
  std::optional<int64_t> value = ParseWhole<int64_t>(setting.value);
  if (!value || *value < 0 || *value > max) Reject(setting, expected);
  return *value;
}

double ReadSeconds(const Setting& setting) {
  std::optional<double> value = ParseFinite(setting.value);
  if (!value || *value < 0) Reject(setting, "a number of seconds >= 0");
  return *value;
}

double ReadMilliseconds(const Setting& setting) {
  std::optional<double> value = ParseFinite(setting.value);
  if (!value || !(*value > 0)) Reject(setting, "a number of milliseconds > 0");
  return *value;
}

bool ReadBool(const Setting& setting) {
  std::string text = ToLower(setting.value);
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  Reject(setting, "a boolean (1/0, true/false, yes/no, on/off)");
}

int ReadShmMode(const Setting& setting) {
  std::string text = ToLower(setting.value);
  if (text == "auto" || text == "1" || text == "true" || text == "yes" || text == "on") return 2;
  if (text == "0" || text == "false" || text == "no" || text == "off") return 0;
  Reject(setting, "auto, or a boolean (1/0, true/false, yes/no, on/off)");
}

LogLevel ReadLogLevel(const Setting& setting) {
  std::string text = ToLower(setting.value);
  for (LogLevel level : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning,
                         LogLevel::kError, LogLevel::kFatal}) {
    if (text == LogLevelName(level)) return level;
  }
  Reject(setting, "a log level (trace, debug, info, warning, error, fatal)");
}

GpuOperations ReadGpuOperations(const Setting& setting) {
  const std::string text = ToLower(setting.value);
  if (text == "nccl") return GpuOperations::kNccl;
  if (text == "mpi") return GpuOperations::kMpi;
  if (text == "gloo" || text == "ddl" || text == "ccl") {
    Reject(setting, "supported by lockstep (it has nccl and mpi, not " + text + ")");
  }
  Reject(setting, "nccl or mpi");
}

void ParseGpu(const Lookup& lookup, Config* config) {
  if (auto s = FindSetting(lookup, "GPU_OPERATIONS")) {
    config->gpu_operations = ReadGpuOperations(*s);
    config->gpu_operations_set = true;
  }
  if (auto s = FindSetting(lookup, "GPU_FUSION_THRESHOLD")) {
    config->gpu_fusion_threshold_bytes =
        ReadInteger(*s, std::numeric_limits<int64_t>::max(), "a whole number of bytes >= 0");
  }
  if (auto s = FindSetting(lookup, "NCCL_TIMEOUT_SECONDS")) {
    config->nccl_timeout_seconds = ReadSeconds(*s);
  }
}

// Horovod's names for the same settings (HOROVOD_AUTOTUNE_WARMUP_SAMPLES, ...) work too.
void ParseAutotune(const Lookup& lookup, Config* config) {
  if (auto s = FindSetting(lookup, "AUTOTUNE")) config->autotune = ReadBool(*s);
  if (auto s = FindSetting(lookup, "AUTOTUNE_LOG")) config->autotune_log = s->value;
  if (auto s = FindSetting(lookup, "AUTOTUNE_WARMUP_SAMPLES")) {
    config->autotune_warmup_windows =
        static_cast<int>(ReadInteger(*s, 1000000, "a whole number of windows from 0 to 1000000"));
  }
  if (auto s = FindSetting(lookup, "AUTOTUNE_STEPS_PER_SAMPLE")) {
    config->autotune_cycles_per_window =
        static_cast<int>(ReadInteger(*s, 1000000, "a whole number of cycles from 1 to 1000000"));
    if (config->autotune_cycles_per_window < 1) {
      throw ConfigError(s->name + "=\"" + s->value + "\" must be at least 1");
    }
  }
}

}  // namespace

const char* GpuOperationsName(GpuOperations operations) {
  return operations == GpuOperations::kMpi ? "mpi" : "nccl";
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    case LogLevel::kFatal:
      return "fatal";
  }
  return "unknown";
}

Config ParseConfig(const Lookup& lookup) {
  Config config;
  if (auto s = FindSetting(lookup, "FUSION_THRESHOLD")) {
    config.fusion_threshold_bytes =
        ReadInteger(*s, std::numeric_limits<int64_t>::max(), "a whole number of bytes >= 0");
    config.fusion_threshold_set = true;
  }
  if (auto s = FindSetting(lookup, "CHUNK_BYTES")) {
    config.chunk_bytes = ReadInteger(*s, std::numeric_limits<int64_t>::max(),
                                     "a whole number of bytes >= 0, a multiple of 8");
    if (config.chunk_bytes % 8 != 0) {
      throw ConfigError(s->name + "=\"" + s->value + "\" is not a multiple of 8 bytes");
    }
    config.chunk_bytes_set = true;
  }
  if (auto s = FindSetting(lookup, "SHM_ALLREDUCE")) {
    config.shm_allreduce_min_ranks = ReadShmMode(*s);
    config.shm_allreduce_set = true;
  }
  if (auto s = FindSetting(lookup, "CYCLE_TIME")) {
    config.cycle_time_ms = ReadMilliseconds(*s);
    config.cycle_time_set = true;
  }
  if (auto s = FindSetting(lookup, "CACHE_CAPACITY")) {
    config.cache_capacity = static_cast<int>(ReadInteger(
        *s, kMaxCacheCapacity, "a whole number from 0 to " + std::to_string(kMaxCacheCapacity)));
  }
  if (auto s = FindSetting(lookup, "NEGOTIATION_PAYLOAD_BYTES")) {
    config.negotiation_payload_bytes = static_cast<int>(
        ReadInteger(*s, kMaxNegotiationPayloadBytes,
                    "a whole number of bytes from 0 to " +
                        std::to_string(kMaxNegotiationPayloadBytes) + ", a multiple of 8"));
    if (config.negotiation_payload_bytes % 8 != 0) {
      throw ConfigError(s->name + "=\"" + s->value + "\" is not a multiple of 8 bytes");
    }
  }
  if (auto s = FindSetting(lookup, "TIMELINE")) config.timeline_path = s->value;
  if (auto s = FindSetting(lookup, "TIMELINE_MARK_CYCLES")) {
    config.timeline_mark_cycles = ReadBool(*s);
  }
  if (auto s = FindSetting(lookup, "STALL_CHECK_TIME_SECONDS")) {
    config.stall_check_seconds = ReadSeconds(*s);
  }
  if (auto s = FindSetting(lookup, "STALL_CHECK_DISABLE"))
    config.stall_check_disabled = ReadBool(*s);
  if (auto s = FindSetting(lookup, "STALL_SHUTDOWN_TIME_SECONDS")) {
    config.stall_shutdown_seconds = ReadSeconds(*s);
  }
  if (auto s = FindSetting(lookup, "PEER_TIMEOUT_SECONDS")) {
    config.peer_timeout_seconds = ReadSeconds(*s);
  }
  if (auto s = FindSetting(lookup, "HIERARCHICAL_ALLREDUCE")) {
    config.hierarchical_allreduce = ReadBool(*s);
  }
  if (auto s = FindSetting(lookup, "CALLER_CYCLES")) config.caller_cycles = ReadBool(*s);
  if (auto s = FindSetting(lookup, "LOG_LEVEL")) config.log_level = ReadLogLevel(*s);
  if (auto s = FindSetting(lookup, "HOST_BUFFER_CACHE_BYTES")) {
    config.host_buffer_cache_bytes =
        ReadInteger(*s, std::numeric_limits<int64_t>::max(), "a whole number of bytes >= 0");
  }
  ParseAutotune(lookup, &config);
  ParseGpu(lookup, &config);
  return config;
}

Config ConfigFromEnvironment() {
  return ParseConfig([](const char* name) -> const char* { return std::getenv(name); });
}

std::string Describe(const Config& config) {
  std::ostringstream out;
  out << "fusion_threshold=" << config.fusion_threshold_bytes << "B"
      << " chunk=" << config.chunk_bytes << "B"
      << " shm_allreduce_min_ranks=" << config.shm_allreduce_min_ranks
      << " cycle_time=" << config.cycle_time_ms << "ms"
      << " cache_capacity=" << config.cache_capacity
      << " negotiation_payload=" << config.negotiation_payload_bytes << "B timeline="
      << (config.timeline_path.empty() ? "none" : "\"" + config.timeline_path + "\"")
      << " mark_cycles=" << (config.timeline_mark_cycles ? "true" : "false") << " stall_check=";
  if (config.stall_check_disabled || config.stall_check_seconds == 0) {
    out << "off";
  } else {
    out << config.stall_check_seconds << "s";
  }
  out << " stall_shutdown=";
  if (config.stall_shutdown_seconds == 0) {
    out << "never";
  } else {
    out << config.stall_shutdown_seconds << "s";
  }
  out << " peer_timeout=";
  if (config.peer_timeout_seconds == 0) {
    out << "never";
  } else {
    out << config.peer_timeout_seconds << "s";
  }
  out << " hierarchical_allreduce=" << (config.hierarchical_allreduce ? "on" : "off");
  out << " caller_cycles=" << (config.caller_cycles ? "on" : "off");
  out << " host_buffer_cache=" << config.host_buffer_cache_bytes << "B";
  out << " gpu_operations=" << GpuOperationsName(config.gpu_operations)
      << " gpu_fusion_threshold=" << config.gpu_fusion_threshold_bytes << "B nccl_timeout=";
  if (config.nccl_timeout_seconds == 0) {
    out << "never";
  } else {
    out << config.nccl_timeout_seconds << "s";
  }
  out << " log_level=" << LogLevelName(config.log_level)
      << " autotune=" << (config.autotune ? "on" : "off");
  return out.str();
}

}  // namespace lockstep
