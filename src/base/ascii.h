// ASCII case-insensitive comparison, for protocol tokens: HTTP field names and
// tokens ("chunked", "100-continue"), units, scheme names. Only A-Z and a-z
// fold; every other byte (including UTF-8 and the locale's letters) compares
// exactly, so the result never depends on the process locale.
//
// Thread safety: pure functions. Ownership: views into the caller's strings.
#ifndef TOLLGATE_SRC_BASE_ASCII_H_
#define TOLLGATE_SRC_BASE_ASCII_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace tollgate::base {

// 'A'..'Z' -> 'a'..'z'; any other byte unchanged.
constexpr char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

// `s` with A-Z folded to a-z.
std::string AsciiLowered(std::string_view s);

// True when a and b have the same length and equal bytes after AsciiLower.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix);
// True when `needle` occurs in `s` (an empty needle always does).
bool ContainsIgnoreCase(std::string_view s, std::string_view needle);

}  // namespace tollgate::base

#endif  // TOLLGATE_SRC_BASE_ASCII_H_
