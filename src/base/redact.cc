#include "base/redact.h"

#include <array>
#include <functional>

#include "tollgate/http_text.h"

namespace tollgate::base {
namespace {

// "user:secret" -> "user:***"; "secret" -> "***"; "" stays "" (no secret).
std::string RedactUserInfo(std::string_view userinfo) {
  const size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) return userinfo.empty() ? "" : std::string(kRedacted);
  return std::string(userinfo.substr(0, colon + 1)) + std::string(kRedacted);
}

// "h/0?a=1&token=x" -> "h/0?a=1&token=***": every piece between '?' and '&'
// delimiters is a possible "name=value" (a query may hold a raw '?').
std::string RedactParams(std::string_view rest) {
  std::string out;
  while (true) {
    const size_t delimiter = rest.find_first_of("?&");
    const std::string_view pair = rest.substr(0, delimiter);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && IsSensitiveQueryName(pair.substr(0, eq))) {
      out.append(pair.substr(0, eq + 1)).append(kRedacted);
    } else {
      out.append(pair);
    }
    if (delimiter == std::string_view::npos) return out;
    out += rest[delimiter];
    rest.remove_prefix(delimiter + 1);
  }
}

std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 3);
  for (char c : text.substr(0, max_bytes)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > max_bytes) out += "...";
  return out;
}

}  // namespace

bool IsSensitiveQueryName(std::string_view name) {
  const std::string lower = AsciiLowered(name);
  static constexpr std::array<std::string_view, 5> kParts = {"pass", "pwd", "token", "secret",
                                                             "auth"};
  for (std::string_view part : kParts) {
    if (lower.find(part) != std::string::npos) return true;
  }
  return lower == "key" || lower == "apikey" || lower == "api_key";
}

std::string RedactUrlPiece(std::string_view url, std::string_view piece) {
  const size_t at = url.rfind('@');
  const std::less_equal<const char*> at_most;  // total order, also across unrelated strings
  const bool inside =
      at_most(url.data(), piece.data()) && at_most(piece.data(), url.data() + url.size());
  if (!inside || (at != std::string_view::npos && size_t(piece.data() - url.data()) <= at)) {
    return RedactUrl(url);
  }
  return Printable(RedactParams(piece), 64);
}

std::string RedactUrl(std::string_view url, size_t max_bytes) {
  // A "://" after an '@' is no scheme: the text before it may be user info.
  const size_t scheme_end = url.find("://");
  const bool has_scheme = scheme_end != std::string_view::npos &&
                          url.substr(0, scheme_end).find('@') == std::string_view::npos;
  const size_t start = has_scheme ? scheme_end + 3 : 0;
  std::string out(url.substr(0, start));
  std::string_view rest = url.substr(start);
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    out += RedactUserInfo(rest.substr(0, at));
    out += '@';
    rest.remove_prefix(at + 1);
  }
  out += RedactParams(rest);
  return Printable(out, max_bytes);
}

}  // namespace tollgate::base
