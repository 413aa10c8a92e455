// Environment settings: defaults, every variable, HOROVOD_* aliases, strict
// rejection of malformed values; plus the Logger that uses the parsed level.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/logging.h"
#include "parse_config.h"

namespace lockstep {
namespace {

using testing::Environment;
using testing::ErrorFor;
using testing::Parse;

TEST(ConfigTest, DefaultsWhenNothingIsSet) {
  Config config = Parse({});
  EXPECT_EQ(config.fusion_threshold_bytes, 128 * 1024 * 1024);
  EXPECT_EQ(config.cycle_time_ms, 1.0);
  EXPECT_EQ(config.cache_capacity, 1024);
  EXPECT_EQ(config.timeline_path, "");
  EXPECT_FALSE(config.timeline_mark_cycles);
  EXPECT_EQ(config.stall_check_seconds, 60.0);
  EXPECT_FALSE(config.stall_check_disabled);
  EXPECT_EQ(config.stall_shutdown_seconds, 0.0);
  EXPECT_EQ(config.peer_timeout_seconds, 60.0);
  EXPECT_FALSE(config.hierarchical_allreduce);
  EXPECT_TRUE(config.caller_cycles);
  EXPECT_EQ(config.log_level, LogLevel::kWarning);
  EXPECT_FALSE(config.autotune);
  EXPECT_EQ(config.autotune_warmup_windows, 3);
  EXPECT_EQ(config.autotune_cycles_per_window, 10);
  EXPECT_FALSE(config.fusion_threshold_set || config.chunk_bytes_set || config.cycle_time_set ||
               config.shm_allreduce_set);
}

TEST(ConfigTest, AutotuneWindowsNeedAtLeastOneCycle) {
  EXPECT_NE(ErrorFor({{"LOCKSTEP_AUTOTUNE_STEPS_PER_SAMPLE", "0"}}).find("at least 1"),
            std::string::npos);
  EXPECT_NE(ErrorFor({{"HOROVOD_AUTOTUNE", "maybe"}}).find("HOROVOD_AUTOTUNE"), std::string::npos);
}

Environment AllSettings(const std::string& prefix) {
  return {{prefix + "FUSION_THRESHOLD", "1048576"},
          {prefix + "CYCLE_TIME", "2.5"},
          {prefix + "CACHE_CAPACITY", "17"},
          {prefix + "TIMELINE", "/tmp/t.json"},
          {prefix + "TIMELINE_MARK_CYCLES", "1"},
          {prefix + "STALL_CHECK_TIME_SECONDS", "5.5"},
          {prefix + "STALL_CHECK_DISABLE", "true"},
          {prefix + "STALL_SHUTDOWN_TIME_SECONDS", "30"},
          {prefix + "PEER_TIMEOUT_SECONDS", "7.5"},
          {prefix + "HIERARCHICAL_ALLREDUCE", "1"},
          {prefix + "CALLER_CYCLES", "0"},
          {prefix + "LOG_LEVEL", "debug"},
          {prefix + "AUTOTUNE", "1"},
          {prefix + "AUTOTUNE_LOG", "/tmp/tune.csv"},
          {prefix + "AUTOTUNE_WARMUP_SAMPLES", "5"},
          {prefix + "AUTOTUNE_STEPS_PER_SAMPLE", "7"}};
}

void ExpectAllSettings(const Config& config) {
  EXPECT_EQ(config.fusion_threshold_bytes, 1048576);
  EXPECT_EQ(config.cycle_time_ms, 2.5);
  EXPECT_EQ(config.cache_capacity, 17);
  EXPECT_EQ(config.timeline_path, "/tmp/t.json");
  EXPECT_TRUE(config.timeline_mark_cycles);
  EXPECT_EQ(config.stall_check_seconds, 5.5);
  EXPECT_TRUE(config.stall_check_disabled);
  EXPECT_EQ(config.stall_shutdown_seconds, 30.0);
  EXPECT_EQ(config.peer_timeout_seconds, 7.5);
  EXPECT_TRUE(config.hierarchical_allreduce);
  EXPECT_FALSE(config.caller_cycles);
  EXPECT_EQ(config.log_level, LogLevel::kDebug);
  EXPECT_TRUE(config.autotune);
  EXPECT_EQ(config.autotune_log, "/tmp/tune.csv");
  EXPECT_EQ(config.autotune_warmup_windows, 5);
  EXPECT_EQ(config.autotune_cycles_per_window, 7);
  // Set explicitly, so the autotuner leaves them alone.
  EXPECT_TRUE(config.fusion_threshold_set);
  EXPECT_TRUE(config.cycle_time_set);
  EXPECT_FALSE(config.chunk_bytes_set);
  EXPECT_FALSE(config.shm_allreduce_set);
}

TEST(ConfigTest, ReadsEveryLockstepVariable) { ExpectAllSettings(Parse(AllSettings("LOCKSTEP_"))); }

TEST(ConfigTest, ReadsEveryHorovodAlias) { ExpectAllSettings(Parse(AllSettings("HOROVOD_"))); }

TEST(ConfigTest, LockstepNameWinsOverHorovodAlias) {
  Environment env = AllSettings("LOCKSTEP_");
  for (const auto& [name, value] : AllSettings("HOROVOD_")) {
    // Garbage under the alias proves the alias is not even parsed.
    env[name] = "not-a-value";
  }
  ExpectAllSettings(Parse(env));
}

TEST(ConfigTest, HorovodAliasUsedWhenLockstepNameUnset) {
  Config config = Parse({{"HOROVOD_CACHE_CAPACITY", "3"}, {"LOCKSTEP_CYCLE_TIME", "7"}});
  EXPECT_EQ(config.cache_capacity, 3);
  EXPECT_EQ(config.cycle_time_ms, 7.0);
}

TEST(ConfigTest, NegotiationPayloadIsOffByDefaultAndAMultipleOfEightUpTo256) {
  EXPECT_EQ(Parse({}).negotiation_payload_bytes, 64);
  EXPECT_EQ(Parse({{"LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES", "0"}}).negotiation_payload_bytes, 0);
  EXPECT_EQ(Parse({{"LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES", "64"}}).negotiation_payload_bytes, 64);
  EXPECT_EQ(Parse({{"LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES", "256"}}).negotiation_payload_bytes, 256);
  for (const char* bad : {"12", "264", "-8", "64B"}) {
    EXPECT_THROW(Parse({{"LOCKSTEP_NEGOTIATION_PAYLOAD_BYTES", bad}}), ConfigError) << bad;
  }
}

TEST(ConfigTest, HostBufferCacheIsBytesAndZeroTurnsItOff) {
  EXPECT_EQ(Parse({}).host_buffer_cache_bytes, 128 * 1024 * 1024);
  EXPECT_EQ(Parse({{"LOCKSTEP_HOST_BUFFER_CACHE_BYTES", "0"}}).host_buffer_cache_bytes, 0);
  EXPECT_EQ(Parse({{"HOROVOD_HOST_BUFFER_CACHE_BYTES", "4096"}}).host_buffer_cache_bytes, 4096);
  for (const char* bad : {"-1", "1.5", "64MiB", ""}) {
    EXPECT_THROW(Parse({{"LOCKSTEP_HOST_BUFFER_CACHE_BYTES", bad}}), ConfigError) << bad;
  }
}

TEST(ConfigTest, AcceptsBoundaryValues) {
  Config config = Parse({{"LOCKSTEP_FUSION_THRESHOLD", "0"},
                         {"LOCKSTEP_CACHE_CAPACITY", "65536"},
                         {"LOCKSTEP_CYCLE_TIME", "1e-3"},
                         {"LOCKSTEP_STALL_CHECK_TIME_SECONDS", "0"},
                         {"LOCKSTEP_STALL_SHUTDOWN_TIME_SECONDS", "0.0"}});
  EXPECT_EQ(config.fusion_threshold_bytes, 0);
  EXPECT_EQ(config.cache_capacity, 65536);
  EXPECT_EQ(config.cycle_time_ms, 1e-3);
  EXPECT_EQ(config.stall_check_seconds, 0.0);
  EXPECT_EQ(config.stall_shutdown_seconds, 0.0);
  EXPECT_EQ(Parse({{"LOCKSTEP_CACHE_CAPACITY", "0"}}).cache_capacity, 0);
  EXPECT_EQ(Parse({{"LOCKSTEP_FUSION_THRESHOLD", "9223372036854775807"}}).fusion_threshold_bytes,
            INT64_MAX);
}

TEST(ConfigTest, BoolSpellingsAreCaseInsensitive) {
  for (const char* yes : {"1", "true", "TRUE", "Yes", "on", "ON"}) {
    EXPECT_TRUE(Parse({{"LOCKSTEP_TIMELINE_MARK_CYCLES", yes}}).timeline_mark_cycles) << yes;
  }
  for (const char* no : {"0", "false", "False", "NO", "off", "Off"}) {
    Environment env = {{"LOCKSTEP_STALL_CHECK_DISABLE", no}, {"HOROVOD_STALL_CHECK_DISABLE", "1"}};
    EXPECT_FALSE(Parse(env).stall_check_disabled) << no;
  }
}

TEST(ConfigTest, SharedMemoryAllreduceModes) {
  EXPECT_EQ(Parse({}).shm_allreduce_min_ranks, 2);  // auto: from 2 ranks of one host
  EXPECT_EQ(Parse({{"LOCKSTEP_SHM_ALLREDUCE", "AUTO"}}).shm_allreduce_min_ranks, 2);
  EXPECT_EQ(Parse({{"LOCKSTEP_SHM_ALLREDUCE", "on"}}).shm_allreduce_min_ranks, 2);
  EXPECT_EQ(Parse({{"LOCKSTEP_SHM_ALLREDUCE", "0"}}).shm_allreduce_min_ranks, 0);
  EXPECT_NE(ErrorFor({{"LOCKSTEP_SHM_ALLREDUCE", "sometimes"}}).find("auto, or a boolean"),
            std::string::npos);
}

TEST(ConfigTest, LogLevelNamesAreCaseInsensitive) {
  const std::vector<std::pair<std::string, LogLevel>> levels = {
      {"trace", LogLevel::kTrace},     {"DEBUG", LogLevel::kDebug}, {"Info", LogLevel::kInfo},
      {"warning", LogLevel::kWarning}, {"ERROR", LogLevel::kError}, {"fatal", LogLevel::kFatal}};
  for (const auto& [text, level] : levels) {
    EXPECT_EQ(Parse({{"LOCKSTEP_LOG_LEVEL", text}}).log_level, level) << text;
  }
}

TEST(ConfigTest, EmptyTimelineMeansNoTimeline) {
  EXPECT_EQ(Parse({{"LOCKSTEP_TIMELINE", ""}}).timeline_path, "");
}

struct BadValue {
  std::string suffix;
  std::string value;
  std::string expected;  // a phrase the message must contain
};

TEST(ConfigTest, RejectsMalformedValuesNamingVariableValueAndExpectation) {
  const std::string bytes = "a whole number of bytes >= 0";
  const std::string millis = "a number of milliseconds > 0";
  const std::string seconds = "a number of seconds >= 0";
  const std::string capacity = "a whole number from 0 to 65536";
  const std::string boolean = "a boolean";
  const std::string level = "a log level";
  const std::vector<BadValue> cases = {
      {"FUSION_THRESHOLD", "12abc", bytes},
      {"FUSION_THRESHOLD", "", bytes},
      {"FUSION_THRESHOLD", "-1", bytes},
      {"FUSION_THRESHOLD", "1.5", bytes},
      {"FUSION_THRESHOLD", " 5", bytes},
      {"FUSION_THRESHOLD", "5 ", bytes},
      {"FUSION_THRESHOLD", "0x10", bytes},
      {"FUSION_THRESHOLD", "99999999999999999999", bytes},
      {"CYCLE_TIME", "abc", millis},
      {"CYCLE_TIME", "", millis},
      {"CYCLE_TIME", "0", millis},
      {"CYCLE_TIME", "-1", millis},
      {"CYCLE_TIME", "nan", millis},
      {"CYCLE_TIME", "inf", millis},
      {"CYCLE_TIME", "1e400", millis},
      {"CYCLE_TIME", "2ms", millis},
      {"CACHE_CAPACITY", "65537", capacity},
      {"CACHE_CAPACITY", "-1", capacity},
      {"CACHE_CAPACITY", "1e3", capacity},
      {"CACHE_CAPACITY", "", capacity},
      {"STALL_CHECK_TIME_SECONDS", "nan", seconds},
      {"STALL_CHECK_TIME_SECONDS", "-0.5", seconds},
      {"STALL_CHECK_TIME_SECONDS", "1e400", seconds},
      {"STALL_CHECK_TIME_SECONDS", "60s", seconds},
      {"STALL_SHUTDOWN_TIME_SECONDS", "-1", seconds},
      {"STALL_SHUTDOWN_TIME_SECONDS", "", seconds},
      {"TIMELINE_MARK_CYCLES", "2", boolean},
      {"TIMELINE_MARK_CYCLES", "", boolean},
      {"STALL_CHECK_DISABLE", "maybe", boolean},
      {"LOG_LEVEL", "warn", level},
      {"LOG_LEVEL", "", level},
      {"LOG_LEVEL", "verbose", level},
  };
  for (const BadValue& bad : cases) {
    for (const std::string prefix : {"LOCKSTEP_", "HOROVOD_"}) {
      std::string name = prefix + bad.suffix;
      std::string message = ErrorFor({{name, bad.value}});
      EXPECT_NE(message.find(name + "=\"" + bad.value + "\" is not "), std::string::npos)
          << name << "=" << bad.value << ": " << message;
      EXPECT_NE(message.find(bad.expected), std::string::npos) << message;
    }
  }
}

TEST(ConfigTest, ErrorMessageMatchesDocumentedWording) {
  EXPECT_EQ(ErrorFor({{"LOCKSTEP_CYCLE_TIME", "abc"}}),
            "LOCKSTEP_CYCLE_TIME=\"abc\" is not a number of milliseconds > 0");
}

TEST(ConfigTest, ReadsTheProcessEnvironment) {
  ASSERT_EQ(setenv("LOCKSTEP_CACHE_CAPACITY", "42", 1), 0);
  Config config = ConfigFromEnvironment();
  unsetenv("LOCKSTEP_CACHE_CAPACITY");
  EXPECT_EQ(config.cache_capacity, 42);
}

TEST(ConfigTest, DescribeMentionsEverySetting) {
  Config config = Parse(AllSettings("LOCKSTEP_"));
  config.stall_check_disabled = false;
  std::string text = Describe(config);
  for (const char* part : {"fusion_threshold=1048576B", "cycle_time=2.5ms", "cache_capacity=17",
                           "timeline=\"/tmp/t.json\"", "mark_cycles=true", "stall_check=5.5s",
                           "stall_shutdown=30s", "caller_cycles=off", "log_level=debug"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " missing from " << text;
  }
  EXPECT_EQ(text.find('\n'), std::string::npos);
  std::string defaults = Describe(Config());
  EXPECT_NE(defaults.find("timeline=none"), std::string::npos) << defaults;
  EXPECT_NE(defaults.find("stall_shutdown=never"), std::string::npos) << defaults;
}

std::string ReadAll(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char chunk[256];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), file)) > 0) text.append(chunk, got);
  return text;
}

TEST(LoggerTest, WritesPrefixedLinesAtOrAboveItsLevel) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  Logger logger(LogLevel::kInfo, 3, sink);
  EXPECT_FALSE(logger.Enabled(LogLevel::kDebug));
  EXPECT_TRUE(logger.Enabled(LogLevel::kInfo));
  EXPECT_TRUE(logger.Enabled(LogLevel::kFatal));
  logger.Log(LogLevel::kDebug, "hidden");
  logger.Log(LogLevel::kInfo, "shown");
  logger.Log(LogLevel::kError, "bad thing");
  EXPECT_EQ(ReadAll(sink), "[lockstep rank 3] info: shown\n[lockstep rank 3] error: bad thing\n");
  std::fclose(sink);
}

TEST(LoggerTest, LinesFromManyThreadsStayWhole) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  Logger logger(LogLevel::kTrace, 0, sink);
  const std::string message(300, 'x');
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) logger.Log(LogLevel::kInfo, message);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::istringstream lines(ReadAll(sink));
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_EQ(line, "[lockstep rank 0] info: " + message);
    ++count;
  }
  EXPECT_EQ(count, 800);
  std::fclose(sink);
}

}  // namespace
}  // namespace lockstep
