#include "tollgate/status.h"

namespace tollgate {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kConnection:
      return "connection";
    case StatusCode::kScript:
      return "script";
    case StatusCode::kServer:
      return "server";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kOverflow:
      return "overflow";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(StatusCodeName(code_));
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

}  // namespace tollgate
