#include "rls/rls_headers.h"

#include <limits>

namespace tollgate::rls {

int64_t CeilSecondsOf(Nanos d) {
  if (d.count() <= 0) return 0;
  if (d == Decision::kNever) return std::numeric_limits<int64_t>::max() / 1'000'000'000;
  return (d.count() - 1) / 1'000'000'000 + 1;
}

RlsQuotaReport MakeRlsQuotaReport(std::string_view name, const Limit& limit, const Decision& d) {
  RlsQuotaReport r;
  r.name = std::string(name);
  r.quota = limit.burst();
  if (limit.window_ns() > 0) {
    r.window_seconds = CeilSecondsOf(Nanos(limit.window_ns()));
  } else {
    r.window_seconds = CeilSecondsOf(Nanos(limit.tolerance_ns()));
  }
  if (r.window_seconds < 1) r.window_seconds = 1;
  r.remaining = d.remaining < 0 ? 0 : d.remaining;
  const Nanos t = (!d.allowed && d.retry_after != Decision::kNever) ? d.retry_after : d.reset_after;
  r.reset_seconds = CeilSecondsOf(t);
  return r;
}

std::string SfStringOf(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c < 0x20 || c > 0x7e) {
      out += '?';
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::vector<std::pair<std::string, std::string>> RenderRlsHeaders(
    std::span<const RlsQuotaReport> reports, int64_t retry_after_seconds) {
  std::vector<std::pair<std::string, std::string>> out;
  if (reports.empty()) return out;
  std::string policy, state;
  for (const RlsQuotaReport& r : reports) {
    if (!policy.empty()) {
      policy += ", ";
      state += ", ";
    }
    const std::string name = SfStringOf(r.name);
    policy += name + ";q=" + std::to_string(r.quota) + ";w=" + std::to_string(r.window_seconds);
    state += name + ";r=" + std::to_string(r.remaining) + ";t=" + std::to_string(r.reset_seconds);
  }
  out.emplace_back("RateLimit-Policy", std::move(policy));
  out.emplace_back("RateLimit", std::move(state));
  if (retry_after_seconds >= 0) {
    out.emplace_back("Retry-After", std::to_string(retry_after_seconds));
  }
  return out;
}

}  // namespace tollgate::rls
