// ParseConfig over a map instead of the process environment, for the settings tests.
#pragma once

#include <map>
#include <string>

#include "common/config.h"

namespace lockstep {
namespace testing {

using Environment = std::map<std::string, std::string>;

inline Config Parse(const Environment& env) {
  return ParseConfig([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// The ConfigError's message, or "" when `env` parses.
inline std::string ErrorFor(const Environment& env) {
  try {
    Parse(env);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

}  // namespace testing
}  // namespace lockstep
