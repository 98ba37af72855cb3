// RequestView accessors: case-insensitive header lookup and query parsing.
#include <string>

#include "tollgate/request.h"

namespace tollgate {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
               HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

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
  std::string_view q = query;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string_view raw_name = part.substr(0, eq);
    if (Decode(raw_name) != name) continue;
    return eq == std::string_view::npos ? std::string() : Decode(part.substr(eq + 1));
  }
  return std::nullopt;
}

}  // namespace tollgate
