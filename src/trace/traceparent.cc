#include "trace/traceparent.h"

namespace tollgate::trace {
namespace {

int LowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is invalid in traceparent
}

// Decodes exactly 2 * N lowercase hex digits.
template <size_t N>
bool DecodeHex(std::string_view text, std::array<uint8_t, N>* out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    int hi = LowerHexValue(text[2 * i]), lo = LowerHexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

void HexEncode(const uint8_t* bytes, size_t size, char* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
}

std::optional<SpanContext> ParseTraceparent(std::string_view h) {
  // version(2) "-" trace-id(32) "-" parent-id(16) "-" flags(2) [ "-" ... ]
  if (h.size() < 55 || h.size() > kMaxTraceparentBytes) return std::nullopt;
  if (h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  SpanContext c;
  if (!DecodeHex(h.substr(0, 2), &version) || version[0] == 0xff) return std::nullopt;
  if (version[0] == 0 ? h.size() != 55 : h.size() > 55 && h[55] != '-') return std::nullopt;
  if (!DecodeHex(h.substr(3, 32), &c.trace_id) || IsZero(c.trace_id)) return std::nullopt;
  if (!DecodeHex(h.substr(36, 16), &c.span_id) || IsZero(c.span_id)) return std::nullopt;
  if (!DecodeHex(h.substr(53, 2), &flags)) return std::nullopt;
  // Version 00 defines only the sampled bit; a receiver keeps the others clear.
  c.flags = flags[0] & 1;
  return c;
}

std::string FormatTraceparent(const SpanContext& c) {
  std::string s = "00-" + Hex(c.trace_id) + "-" + Hex(c.span_id) + "-0";
  s += c.sampled() ? '1' : '0';
  return s;
}

}  // namespace tollgate::trace
