// HTTP text helpers that every front end shares: the one ASCII case-insensitive
// compare, optional-whitespace trimming, the request-target split and query
// tokenising. tollgated, the framework middlewares (tollgate/middleware/) and
// the client helpers all use these, and RequestView's accessors
// (tollgate/request.h) are built on them.
//
// Case folding is ASCII only: A-Z and a-z fold, every other byte (UTF-8, the
// locale's letters) compares exactly, so no result depends on the process
// locale. Nothing here validates: untrusted bytes are split as they are, never
// rejected or thrown on.
//
// Thread safety: pure functions; a QueryTokenizer belongs to one thread.
// Ownership: every std::string_view returned points into the caller's input.
// Implemented in tollgate_base (src/base/http_text.cc).
#ifndef TOLLGATE_HTTP_TEXT_H_
#define TOLLGATE_HTTP_TEXT_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace tollgate {

// 'A'..'Z' -> 'a'..'z'; any other byte unchanged.
constexpr char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

// `s` with A-Z folded to a-z.
std::string AsciiLowered(std::string_view s);

// True when a and b have the same length and equal bytes after AsciiLower.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix);
// True when `needle` occurs in `s` (an empty needle always does).
bool ContainsIgnoreCase(std::string_view s, std::string_view needle);

// `s` without leading and trailing SP and HTAB (RFC 9110 OWS).
std::string_view TrimOws(std::string_view s);

// A request-target cut at its first '?': "/a?b=1" -> {"/a", "b=1"}. A target
// without '?' is all path and an empty query.
struct RequestTarget {
  std::string_view path;
  std::string_view query;  // without the '?'
};
RequestTarget SplitTarget(std::string_view target);

// Walks a raw query string ("a=1&b&&c=%41") one '&'-separated parameter at a
// time, raw (not percent-decoded). Empty parts are skipped; a part without '='
// has an empty value ("b" -> {"b", ""}); only the first '=' splits ("a=b=c" ->
// {"a", "b=c"}).
class QueryTokenizer {
 public:
  explicit QueryTokenizer(std::string_view query) : rest_(query) {}
  // The next parameter into *raw_name / *raw_value; false when none is left.
  bool Next(std::string_view* raw_name, std::string_view* raw_value);

 private:
  std::string_view rest_;
};

// Calls fn(name, value) for each query parameter of QueryTokenizer, both
// percent-decoded ('+' is a space; an invalid escape is kept as written). The
// views are valid only during the call.
void ForEachQueryParam(std::string_view query,
                       const std::function<void(std::string_view, std::string_view)>& fn);

}  // namespace tollgate

#endif  // TOLLGATE_HTTP_TEXT_H_
