// Client bytes made safe to show in a log line or a terminal: what tollgated's
// logs, the admin API's messages and any front end print of a request (paths,
// keys, header values). The escape is reversible, so nothing is lost.
//
// Thread safety: pure functions. Implemented in tollgate_base
// (src/base/log_text.cc).
#ifndef TOLLGATE_LOG_TEXT_H_
#define TOLLGATE_LOG_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace tollgate {

// Makes client bytes safe to show: the result is valid UTF-8 without C0
// controls, DEL, C1 controls (U+0080..U+009F), bidi controls (U+200E, U+200F,
// U+202A..U+202E, U+2066..U+2069, U+061C) or line/paragraph separators
// (U+2028, U+2029). Those code points become "\u202e" (4 lower-case hex
// digits), every other control byte and every byte that is not part of valid
// UTF-8 (a raw 0x9b too) becomes "\x9b", and a backslash becomes "\\"; the
// rest is copied. At most 4 output bytes per input byte. Pure; safe anywhere.
std::string EscapeLogText(std::string_view text);
// The inverse: UnescapeLogText(EscapeLogText(s)) == s for every s. Text that
// EscapeLogText cannot produce is returned as far as it decodes.
std::string UnescapeLogText(std::string_view text);

// A client-controlled string as a log shows it: its first kMaxClientLogText
// bytes, escaped by EscapeLogText.
inline constexpr size_t kMaxClientLogText = 256;
std::string ClientLogText(std::string_view s);

}  // namespace tollgate

#endif  // TOLLGATE_LOG_TEXT_H_
