#include "base/percent.h"

namespace tollgate::base {
namespace {

// The byte an escape at s[i] ('%' there) stands for, or -1 when s[i+1..i+2]
// are not two hex digits (or the string ends first).
int EscapeAt(std::string_view s, size_t i) {
  if (i + 2 >= s.size()) return -1;
  const int hi = HexDigitValue(s[i + 1]);
  const int lo = HexDigitValue(s[i + 2]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

std::string PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (const int v = EscapeAt(s, i); v >= 0) {
        out.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && c == '+' ? ' ' : c);
  }
  return out;
}

std::optional<std::string> PercentDecodeStrict(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const int v = EscapeAt(s, i);
    if (v < 0) return std::nullopt;
    out.push_back(static_cast<char>(v));
    i += 2;
  }
  return out;
}

}  // namespace tollgate::base
