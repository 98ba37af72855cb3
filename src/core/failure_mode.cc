// FailureMode names (failure_mode.h).
#include "tollgate/failure_mode.h"

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

}  // namespace tollgate
