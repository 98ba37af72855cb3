// LogLevel: how much tollgated logs, and the level's names as the config file
// (log.level) and --log-level spell them, declared once.
//
// Thread safety: constants and pure functions.
#ifndef TOLLGATE_SERVER_LOG_LEVEL_H_
#define TOLLGATE_SERVER_LOG_LEVEL_H_

#include <array>
#include <cstddef>
#include <string_view>

namespace tollgate::server {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Indexed by LogLevel.
inline constexpr std::array<std::string_view, 6> kLogLevelNames = {"trace", "debug", "info",
                                                                   "warn",  "error", "off"};

constexpr std::string_view LogLevelName(LogLevel level) {
  return kLogLevelNames[static_cast<size_t>(level)];
}

// False (and *out unchanged) for a name not in kLogLevelNames.
constexpr bool ParseLogLevel(std::string_view name, LogLevel* out) {
  for (size_t i = 0; i < kLogLevelNames.size(); ++i) {
    if (kLogLevelNames[i] == name) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_LOG_LEVEL_H_
