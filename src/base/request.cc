// RequestView accessors (case-insensitive header lookup, query parameters) and
// NormalizePath: the leaf every front end links (tollgate_base).
#include <string>

#include "tollgate/request.h"

#include "base/percent.h"
#include "tollgate/http_text.h"

namespace tollgate {
namespace {

bool Unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

}  // namespace

std::string NormalizePath(std::string_view path) {
  path = path.substr(0, path.find_first_of("?#"));
  // Most paths are normal already: no escape, no empty or dot segment.
  if (!path.empty() && path.front() == '/' && path.find('%') == std::string_view::npos &&
      path.find("//") == std::string_view::npos && path.find("/.") == std::string_view::npos) {
    return std::string(path);
  }
  // 1. Percent-decoding of unreserved characters only (one pass: "%252e" stays
  // "%252e", so nothing is decoded twice); other escapes get upper-case hex,
  // and a '%' that starts no escape becomes "%25": left bare, it could start
  // one with the characters decoded after it ("%%32e" -> "%2e"), and the
  // result would decode again to another path (".").
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string decoded;
  decoded.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size() && base::HexDigitValue(path[i + 1]) >= 0 &&
        base::HexDigitValue(path[i + 2]) >= 0) {
      const char c = static_cast<char>(base::HexDigitValue(path[i + 1]) * 16 +
                                       base::HexDigitValue(path[i + 2]));
      if (Unreserved(c)) {
        decoded.push_back(c);
      } else {
        decoded.push_back('%');
        decoded.push_back(kHex[(static_cast<unsigned char>(c) >> 4) & 0xf]);
        decoded.push_back(kHex[static_cast<unsigned char>(c) & 0xf]);
      }
      i += 2;
    } else if (path[i] == '%') {
      decoded.append("%25");
    } else {
      decoded.push_back(path[i]);
    }
  }
  if (decoded.empty() || decoded.front() != '/') return decoded;
  // 2. Segments: drop empty ones (repeated slashes) and ".", pop on "..".
  std::string out;
  out.reserve(decoded.size());
  std::string_view rest(decoded);
  bool trailing_slash = false;
  while (!rest.empty()) {
    rest.remove_prefix(1);  // the '/'
    const size_t end = rest.find('/');
    const std::string_view seg = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    const bool last = rest.empty();
    if (seg.empty() || seg == ".") {
      trailing_slash = last;
    } else if (seg == "..") {
      const size_t cut = out.rfind('/');
      out.resize(cut == std::string::npos ? 0 : cut);
      trailing_slash = last;
    } else {
      out.push_back('/');
      out.append(seg);
      trailing_slash = false;
    }
  }
  if (out.empty() || trailing_slash) out.push_back('/');
  return out;
}

std::optional<std::string_view> RequestView::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return v;
  }
  return std::nullopt;
}

std::vector<std::string_view> RequestView::Headers(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) out.push_back(v);
  }
  return out;
}

std::optional<std::string> RequestView::QueryParam(std::string_view name) const {
  QueryTokenizer tokens(query);
  std::string_view raw_name;
  std::string_view raw_value;
  while (tokens.Next(&raw_name, &raw_value)) {
    if (base::PercentDecode(raw_name) == name) return base::PercentDecode(raw_value);
  }
  return std::nullopt;
}

}  // namespace tollgate
