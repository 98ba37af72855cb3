#include "tollgate/log_text.h"

#include <cstdint>

namespace tollgate {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// Length of the valid UTF-8 sequence at the start of `s` (1-4), or 0 when the
// first byte does not start one (RFC 3629: no overlongs, no surrogates, at
// most U+10FFFF). *cp gets the code point.
size_t Utf8Sequence(std::string_view s, uint32_t* cp) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  }
  uint32_t v = c & (0xff >> (n + 1));
  for (size_t i = 1; i < n; ++i) v = (v << 6) | (b(i) & 0x3f);
  *cp = v;
  return n;
}

// Code points shown escaped although valid: C1 controls, bidi controls and
// the separators some viewers take for a line break.
bool Unsafe(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xc0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(char(0xe0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(char(0x80 | (cp & 0x3f)));
  }
}

}  // namespace

std::string EscapeLogText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(text, &cp);
    const unsigned char c = static_cast<unsigned char>(text[0]);
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7f))) {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
      text.remove_prefix(1);
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (Unsafe(cp)) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(cp >> shift) & 0xf]);
    } else {
      out.append(text.substr(0, n));
    }
    text.remove_prefix(n);
  }
  return out;
}

std::string UnescapeLogText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 >= text.size()) {
      out.push_back(text[i]);
      continue;
    }
    const char kind = text[i + 1];
    const size_t digits = kind == 'x' ? 2 : kind == 'u' ? 4 : 0;
    uint32_t v = 0;
    bool ok = digits > 0 && i + 1 + digits < text.size();
    for (size_t d = 0; ok && d < digits; ++d) {
      const int h = HexValue(text[i + 2 + d]);
      ok = h >= 0;
      v = (v << 4) | uint32_t(h < 0 ? 0 : h);
    }
    if (kind == '\\') {
      out.push_back('\\');
      ++i;
    } else if (ok && kind == 'x') {
      out.push_back(char(v));
      i += 3;
    } else if (ok && kind == 'u') {
      AppendUtf8(v, &out);
      i += 5;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string ClientLogText(std::string_view s) {
  return EscapeLogText(s.substr(0, kMaxClientLogText));
}

}  // namespace tollgate
