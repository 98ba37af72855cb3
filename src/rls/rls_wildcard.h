// Wildcard values of envoyproxy/ratelimit descriptors: a configured `value`
// containing `*` matches request values where each `*` stands for any run of
// bytes, empty included, and every other byte for itself ("/api/*/action",
// "foo*bar*baz", "*.example.com", "pre*").
//
// The matcher never backtracks: a pattern is its `*`-separated literal pieces;
// the first must start the value, the last must end it, and each one between
// is taken at its leftmost occurrence after the previous one (leftmost is
// always a correct choice for `*`-only patterns). Work is at most
// |value| * |pattern| byte comparisons, never exponential, whatever the input.
//
// Thread safety: pure functions.
#ifndef TOLLGATE_SRC_RLS_RLS_WILDCARD_H_
#define TOLLGATE_SRC_RLS_RLS_WILDCARD_H_

#include <string_view>

namespace tollgate::rls {

// Whether `value` (a configured descriptor value) is a pattern: it holds a `*`.
bool IsWildcard(std::string_view value);

// Whether `value` matches `pattern` (see above). A pattern without `*` matches
// only itself.
bool WildcardMatch(std::string_view pattern, std::string_view value);

}  // namespace tollgate::rls

#endif  // TOLLGATE_SRC_RLS_RLS_WILDCARD_H_
