// Prometheus text exposition helpers shared by tollgated's metrics and the
// RLS counters (header-only: the RLS library cannot link tollgated's).
#ifndef TOLLGATE_SERVER_PROMETHEUS_TEXT_H_
#define TOLLGATE_SERVER_PROMETHEUS_TEXT_H_

#include <string>
#include <string_view>

namespace tollgate::server {

// A label value with backslash, double quote and newline escaped
// (../shared/specs/protocols.md section 6).
inline std::string PrometheusEscapeLabel(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_PROMETHEUS_TEXT_H_
