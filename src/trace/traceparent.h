// Internal: W3C Trace Context ids and the `traceparent` header.
//
// ParseTraceparent (declared in tollgate/trace.h) is the one parser of the
// header for tollgated (spans and the trace id in logs). It is strict, as W3C Trace Context level 1
// asks of a receiver: lowercase hex only, no all-zero ids, version "ff" invalid, version "00"
// exactly 55 bytes, a later version at least 55 bytes with '-' after the flags. Anything else is
// "no parent": the caller starts a new trace. It never reads past the input and refuses headers
// over kMaxTraceparentBytes.
//
// Thread safety: plain value types and pure functions.
#ifndef TOLLGATE_TRACE_TRACEPARENT_H_
#define TOLLGATE_TRACE_TRACEPARENT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tollgate/trace.h"

namespace tollgate::trace {

// A header longer than this is refused (future versions may append fields;
// 512 bytes is far beyond any version defined so far).
inline constexpr size_t kMaxTraceparentBytes = 512;

// TraceId, SpanId, SpanContext, ParseTraceparent, FormatTraceparent and
// HexEncode are public (tollgate/trace.h).
template <size_t N>
std::string Hex(const std::array<uint8_t, N>& id) {
  std::string s(2 * N, '0');
  HexEncode(id.data(), N, s.data());
  return s;
}

template <size_t N>
bool IsZero(const std::array<uint8_t, N>& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace tollgate::trace

#endif  // TOLLGATE_TRACE_TRACEPARENT_H_
