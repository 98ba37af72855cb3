// RateLimit header rendering, Retry-After jitter and problem+json bodies.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "policy/policy_impl.h"
#include "tollgate/http_text.h"
#include "tollgate/policy_headers.h"

namespace tollgate {

std::string_view HeaderStyleName(HeaderStyle style) {
  switch (style) {
    case HeaderStyle::kDraft11:
      return "draft11";
    case HeaderStyle::kDraft03:
      return "draft03";
    case HeaderStyle::kXRateLimit:
      return "x-ratelimit";
    case HeaderStyle::kXRateLimitEpoch:
      return "x-ratelimit-epoch";
    case HeaderStyle::kNone:
      return "none";
  }
  return "draft11";
}

bool ParseHeaderStyle(std::string_view name, HeaderStyle* out) {
  for (HeaderStyle s : {HeaderStyle::kDraft11, HeaderStyle::kDraft03, HeaderStyle::kXRateLimit,
                        HeaderStyle::kXRateLimitEpoch, HeaderStyle::kNone}) {
    if (HeaderStyleName(s) == name) {
      *out = s;
      return true;
    }
  }
  return false;
}

bool ParseHeaderStyles(std::string_view list, std::vector<HeaderStyle>* out, std::string* error) {
  std::vector<HeaderStyle> styles;
  bool none = false;
  size_t members = 0;
  while (true) {
    const size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    ++members;
    HeaderStyle s;
    if (name.empty()) {
      *error = "empty style in the list (member " + std::to_string(members) + ")";
      return false;
    }
    if (!ParseHeaderStyle(name, &s)) {
      *error = "unknown style \"" + std::string(name.substr(0, 64)) +
               "\" (draft11, draft03, x-ratelimit, x-ratelimit-epoch, none)";
      return false;
    }
    if (std::find(styles.begin(), styles.end(), s) != styles.end() ||
        (none && s == HeaderStyle::kNone)) {
      *error = "style \"" + std::string(name) + "\" is listed twice";
      return false;
    }
    if (s == HeaderStyle::kNone) {
      none = true;
    } else {
      styles.push_back(s);
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (none && !styles.empty()) {
    *error = "\"none\" cannot be combined with other styles";
    return false;
  }
  const auto has = [&](HeaderStyle s) {
    return std::find(styles.begin(), styles.end(), s) != styles.end();
  };
  if (has(HeaderStyle::kXRateLimit) && has(HeaderStyle::kXRateLimitEpoch)) {
    *error = "x-ratelimit and x-ratelimit-epoch both send X-RateLimit-Reset; choose one";
    return false;
  }
  *out = std::move(styles);
  return true;
}

std::string HeaderStylesName(std::span<const HeaderStyle> styles) {
  if (styles.empty()) return "none";
  std::string out;
  for (HeaderStyle s : styles) {
    if (!out.empty()) out += ",";
    out += HeaderStyleName(s);
  }
  return out;
}

uint8_t HeaderStyleMask(std::span<const HeaderStyle> styles) {
  uint8_t mask = 0;
  for (HeaderStyle s : styles) {
    if (s != HeaderStyle::kNone) mask |= static_cast<uint8_t>(1u << static_cast<unsigned>(s));
  }
  return mask;
}

std::vector<HeaderField> RenderRuleHeaders(std::span<const HeaderStyle> defaults,
                                           std::span<const QuotaReport> reports,
                                           std::span<const uint8_t> masks, int64_t wall_now_ns) {
  const uint8_t default_mask = HeaderStyleMask(defaults);
  auto mask_of = [&](size_t i) { return masks[i] == kInheritStyles ? default_mask : masks[i]; };
  // Styles in order: the server's, then the rest in the enum's order.
  std::vector<HeaderStyle> order(defaults.begin(), defaults.end());
  for (HeaderStyle s : {HeaderStyle::kDraft11, HeaderStyle::kDraft03, HeaderStyle::kXRateLimit,
                        HeaderStyle::kXRateLimitEpoch}) {
    if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
  }
  std::vector<HeaderField> out;
  std::vector<QuotaReport> subset;
  for (HeaderStyle s : order) {
    const uint8_t bit = static_cast<uint8_t>(1u << static_cast<unsigned>(s));
    subset.clear();
    for (size_t i = 0; i < reports.size(); ++i) {
      if (mask_of(i) & bit) subset.push_back(reports[i]);
    }
    if (subset.empty()) continue;
    const size_t before = out.size();
    for (HeaderField& f : RenderRateLimitHeaders(s, subset, wall_now_ns)) {
      bool sent = false;
      for (size_t k = 0; k < before && !sent; ++k) sent = EqualsIgnoreCase(out[k].name, f.name);
      if (!sent) out.push_back(std::move(f));
    }
  }
  return out;
}

int64_t CeilSeconds(Nanos d) {
  const int64_t ns = d.count();
  if (ns <= 0) return 0;
  return ns / 1'000'000'000 + (ns % 1'000'000'000 != 0 ? 1 : 0);
}

namespace {

// Whole seconds, rounded up, of a bucket time `d` of a limit given as a count
// per period. Its integer interval rounds period / count up by less than 1 ns
// a token (7 per 13 s: 7 tokens take 13 s + 6 ns), which rounding up to
// seconds must not turn into a whole extra second (14): scale back by the
// exact ratio (period / count) / interval first. Rates and exact intervals
// are unchanged.
int64_t PeriodSeconds(const Limit& limit, Nanos d) {
  if (limit.count() <= 0 || d.count() <= 0 || limit.window_ns() > 0) return CeilSeconds(d);
  using i128 = __int128;
  // d <= 2^62, period <= 2^55; count * interval < period + count <= 2^56.
  const i128 num = static_cast<i128>(d.count()) * limit.period_ns();
  const i128 den = static_cast<i128>(limit.count()) * limit.interval_ns() * 1'000'000'000;
  return static_cast<int64_t>((num + den - 1) / den);
}

// The policy's window in seconds: the period, or a calendar's nominal length
// (a day 86400, a week 604800, a month 2678400 = 31 days, its longest).
int64_t WindowSeconds(const Limit& limit) {
  if (const Calendar* cal = limit.calendar()) {
    switch (cal->unit()) {
      case CalendarUnit::kDay:
        return 86400;
      case CalendarUnit::kWeek:
        return 7 * 86400;
      case CalendarUnit::kMonth:
        return 31 * 86400;
    }
  }
  return std::max<int64_t>(1, PeriodSeconds(limit, Nanos(limit.tolerance_ns())));
}

}  // namespace

QuotaReport MakeQuotaReport(std::string_view name, const Limit& limit, const Decision& d) {
  QuotaReport r;
  r.name = std::string(name);
  r.quota = d.limit > 0 ? d.limit : limit.burst();
  r.window_seconds = WindowSeconds(limit);
  r.remaining = std::max<int64_t>(0, d.remaining);
  if (d.allowed || d.retry_after == Decision::kNever) {
    r.reset_seconds = PeriodSeconds(limit, d.reset_after);
  } else {
    r.reset_seconds = PeriodSeconds(limit, d.retry_after);
  }
  return r;
}

namespace {

// Rendering appends to strings sized up front: one allocation per header
// value, no temporaries (issue 32: the request path allocates per decision).
constexpr size_t kMaxIntChars = 20;  // INT64_MIN

void AppendInt(std::string& out, int64_t v) {
  char buf[kMaxIntChars];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

std::string IntText(int64_t v) {
  std::string out;
  AppendInt(out, v);  // within the short-string buffer: no allocation
  return out;
}

// The bytes SfString(s) renders.
size_t SfSize(std::string_view s) {
  size_t n = s.size() + 2;
  for (char c : s) n += c == '"' || c == '\\';
  return n;
}

void AppendSf(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c > 0x7e) {
      out.push_back('?');
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

}  // namespace

std::string SfString(std::string_view s) {
  std::string out;
  out.reserve(SfSize(s));
  AppendSf(out, s);
  return out;
}

std::vector<HeaderField> RenderRateLimitHeaders(HeaderStyle style,
                                                std::span<const QuotaReport> reports,
                                                int64_t wall_now_ns) {
  std::vector<HeaderField> out;
  if (reports.empty() || style == HeaderStyle::kNone) return out;
  if (style == HeaderStyle::kDraft11) {
    size_t size = 0;
    for (const QuotaReport& r : reports) size += SfSize(r.name) + 2 + 2 * (3 + kMaxIntChars);
    std::string policy;
    std::string state;
    policy.reserve(size);
    state.reserve(size);
    for (const QuotaReport& r : reports) {
      if (!policy.empty()) {
        policy += ", ";
        state += ", ";
      }
      AppendSf(policy, r.name);
      policy += ";q=";
      AppendInt(policy, r.quota);
      policy += ";w=";
      AppendInt(policy, r.window_seconds);
      AppendSf(state, r.name);
      state += ";r=";
      AppendInt(state, r.remaining);
      state += ";t=";
      AppendInt(state, r.reset_seconds);
    }
    out.reserve(2);
    out.push_back({"RateLimit-Policy", std::move(policy)});
    out.push_back({"RateLimit", std::move(state)});
    return out;
  }
  // Single-value styles report the policy closest to running out.
  const QuotaReport* tight = &reports.front();
  for (const QuotaReport& r : reports) {
    if (r.remaining < tight->remaining ||
        (r.remaining == tight->remaining && r.reset_seconds > tight->reset_seconds)) {
      tight = &r;
    }
  }
  out.reserve(3);
  if (style == HeaderStyle::kDraft03) {
    out.push_back({"RateLimit-Limit", IntText(tight->quota)});
    out.push_back({"RateLimit-Remaining", IntText(tight->remaining)});
    out.push_back({"RateLimit-Reset", IntText(tight->reset_seconds)});
    return out;
  }
  int64_t reset = tight->reset_seconds;
  if (style == HeaderStyle::kXRateLimitEpoch) {
    // Rounded up, so the epoch never names an instant before the real reset.
    reset += CeilSeconds(Nanos(wall_now_ns));
  }
  out.push_back({"X-RateLimit-Limit", IntText(tight->quota)});
  out.push_back({"X-RateLimit-Remaining", IntText(tight->remaining)});
  out.push_back({"X-RateLimit-Reset", IntText(reset)});
  return out;
}

std::vector<HeaderField> RenderRateLimitHeaders(std::span<const HeaderStyle> styles,
                                                std::span<const QuotaReport> reports,
                                                int64_t wall_now_ns) {
  if (styles.size() == 1) return RenderRateLimitHeaders(styles.front(), reports, wall_now_ns);
  std::vector<HeaderField> out;
  for (HeaderStyle style : styles) {
    std::vector<HeaderField> fields = RenderRateLimitHeaders(style, reports, wall_now_ns);
    const bool seen = std::any_of(fields.begin(), fields.end(), [&](const HeaderField& f) {
      return std::any_of(out.begin(), out.end(),
                         [&](const HeaderField& o) { return EqualsIgnoreCase(o.name, f.name); });
    });
    if (seen) continue;  // never two copies of one field (ParseHeaderStyles refuses such lists)
    for (HeaderField& f : fields) out.push_back(std::move(f));
  }
  return out;
}

double JitterUnit(std::string_view identity, uint64_t seed) {
  // 53 high bits -> [0, 1) exactly representable.
  return static_cast<double>(StableHash(identity, seed) >> 11) * 0x1.0p-53;
}

int64_t RetryAfterSeconds(Nanos wait, std::string_view identity, double jitter, uint64_t seed) {
  if (wait == Decision::kNever) return -1;
  int64_t ns = std::max<int64_t>(0, wait.count());
  if (jitter > 0 && ns > 0) {
    const double extra = std::floor(static_cast<double>(ns) * jitter * JitterUnit(identity, seed));
    // Saturate instead of overflowing on absurd waits.
    if (extra >= static_cast<double>(INT64_MAX - ns)) {
      ns = INT64_MAX;
    } else {
      ns += static_cast<int64_t>(extra);
    }
  }
  return std::max<int64_t>(ns > 0 ? 1 : 0, CeilSeconds(Nanos(ns)));
}

namespace {

// The reference rendering: nlohmann::json's dump, which validates UTF-8 and
// replaces invalid sequences. ProblemJson's writer renders the same bytes for
// ASCII text and falls back to this for anything else.
std::string ProblemJsonThroughNlohmann(ProblemKind kind, std::string_view type_base,
                                       std::span<const std::string> violated_policies,
                                       std::string_view detail, int64_t retry_after_seconds) {
  nlohmann::json body;
  if (kind == ProblemKind::kForbidden) {
    body["type"] = "about:blank";
    body["title"] = "Forbidden";
    body["status"] = 403;
    if (!detail.empty()) body["detail"] = std::string(detail);
    auto& list = body["violated-policies"] = nlohmann::json::array();
    for (const std::string& p : violated_policies) list.push_back(p);
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const bool quota = kind == ProblemKind::kQuotaExceeded;
  body["type"] = std::string(type_base) + (quota ? "quota-exceeded" : "temporary-reduced-capacity");
  body["title"] = quota ? "Request cannot be satisfied as assigned quota has been exceeded"
                        : "Temporary reduced capacity";
  body["status"] = quota ? 429 : 503;
  if (!detail.empty()) body["detail"] = std::string(detail);
  if (!violated_policies.empty()) {
    auto& list = body["violated-policies"] = nlohmann::json::array();
    for (const std::string& p : violated_policies) list.push_back(p);
  }
  if (retry_after_seconds > 0) body["retry-after"] = retry_after_seconds;
  // Replace, never throw, on invalid UTF-8 (names are validated ASCII anyway).
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Appends `s` as nlohmann::json::dump (ensure_ascii off) renders a string.
// False for a byte above 0x7f (dump validates UTF-8 and replaces invalid
// sequences: left to it), with `out` then unspecified.
bool AppendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c >= 0x80) return false;
        if (c < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
          out.append(escape, sizeof escape);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return true;
}

// A member `"name":` after the ones before it (nlohmann's objects sort their
// keys: members are written in that order).
void AppendKey(std::string& out, std::string_view name) {
  if (out.size() > 1) out.push_back(',');
  out.push_back('"');
  out.append(name);
  out += "\":";
}

}  // namespace

std::string ProblemJson(ProblemKind kind, std::string_view type_base,
                        std::span<const std::string> violated_policies, std::string_view detail,
                        int64_t retry_after_seconds) {
  // Written by hand, byte for byte what ProblemJsonThroughNlohmann renders
  // (issue 32: a denial built a JSON tree per request); members in key order.
  const bool forbidden = kind == ProblemKind::kForbidden;
  const bool quota = kind == ProblemKind::kQuotaExceeded;
  const std::string_view type_tail = forbidden ? ""
                                     : quota   ? "quota-exceeded"
                                               : "temporary-reduced-capacity";
  const std::string_view title =
      forbidden ? "Forbidden"
      : quota   ? "Request cannot be satisfied as assigned quota has been exceeded"
                : "Temporary reduced capacity";
  size_t size = 160 + type_base.size() + type_tail.size() + title.size() + 2 * detail.size();
  for (const std::string& p : violated_policies) size += 2 * p.size() + 3;
  std::string out;
  out.reserve(size);
  out.push_back('{');
  bool ascii = true;
  if (!detail.empty()) {
    AppendKey(out, "detail");
    ascii = AppendJsonString(out, detail);
  }
  if (!forbidden && retry_after_seconds > 0) {
    AppendKey(out, "retry-after");
    AppendInt(out, retry_after_seconds);
  }
  AppendKey(out, "status");
  AppendInt(out, forbidden ? 403 : quota ? 429 : 503);
  AppendKey(out, "title");
  AppendJsonString(out, title);
  AppendKey(out, "type");
  if (forbidden) {
    out += "\"about:blank\"";
  } else {
    ascii = ascii && AppendJsonString(out, type_base);
    out.pop_back();  // type_base's closing quote: the tail follows
    out.append(type_tail);
    out.push_back('"');
  }
  if (forbidden || !violated_policies.empty()) {
    AppendKey(out, "violated-policies");
    out.push_back('[');
    for (size_t i = 0; ascii && i < violated_policies.size(); ++i) {
      if (i > 0) out.push_back(',');
      ascii = AppendJsonString(out, violated_policies[i]);
    }
    out.push_back(']');
  }
  out.push_back('}');
  if (!ascii) {
    return ProblemJsonThroughNlohmann(kind, type_base, violated_policies, detail,
                                      retry_after_seconds);
  }
  return out;
}

}  // namespace tollgate
