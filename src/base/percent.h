// Percent-decoding (RFC 3986 2.1) in its two uses:
//  - lenient, for query strings and form data (what browsers and servers do):
//    a '%' that does not start a valid escape ("%", "%4", "%zz") is kept as it
//    is, and '+' may mean a space;
//  - strict, for URL parts that must be exact (a Redis URL's user, password,
//    options): any '%' not followed by two hex digits is an error.
// Both decode "%00" to a NUL byte: callers that cannot hold one must check.
// Both decode in one pass: "%2541" becomes "%41", never "A".
//
// Thread safety: pure functions.
#ifndef TOLLGATE_SRC_BASE_PERCENT_H_
#define TOLLGATE_SRC_BASE_PERCENT_H_

#include <optional>
#include <string>
#include <string_view>

namespace tollgate::base {

// 0..15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other byte.
constexpr int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Lenient: valid %XX escapes decoded, anything else copied; '+' becomes ' '
// when plus_is_space (application/x-www-form-urlencoded).
std::string PercentDecode(std::string_view s, bool plus_is_space = true);

// Strict: nullopt when a '%' is not followed by two hex digits. '+' is kept.
std::optional<std::string> PercentDecodeStrict(std::string_view s);

}  // namespace tollgate::base

#endif  // TOLLGATE_SRC_BASE_PERCENT_H_
