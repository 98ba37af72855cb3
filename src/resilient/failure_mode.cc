#include <utility>

#include "tollgate/resilient_store.h"

namespace tollgate {

std::string_view FailureModeName(FailureMode m) {
  switch (m) {
    case FailureMode::kOpen:
      return "open";
    case FailureMode::kClosed:
      return "closed";
    case FailureMode::kDegrade:
      return "degrade";
  }
  return "unknown";
}

bool ParseFailureMode(std::string_view name, FailureMode* out) {
  if (name == "open" || name == "fail-open" || name == "fail_open") {
    *out = FailureMode::kOpen;
  } else if (name == "closed" || name == "fail-closed" || name == "fail_closed") {
    *out = FailureMode::kClosed;
  } else if (name == "degrade" || name == "degraded") {
    *out = FailureMode::kDegrade;
  } else {
    return false;
  }
  return true;
}

FailureModeResolver FailureModesByRule(std::map<std::string, FailureMode, std::less<>> by_rule,
                                       FailureMode fallback) {
  return [by_rule = std::move(by_rule), fallback](std::string_view key) {
    const size_t sep = key.find('\x1f');
    if (sep == std::string_view::npos) return fallback;
    auto it = by_rule.find(key.substr(0, sep));
    return it == by_rule.end() ? fallback : it->second;
  };
}

}  // namespace tollgate
