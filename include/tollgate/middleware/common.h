// Small helpers shared by the framework adapters in this folder.
//
// Thread safety: pure functions. Ownership: views into the caller's strings.
#ifndef TOLLGATE_MIDDLEWARE_COMMON_H_
#define TOLLGATE_MIDDLEWARE_COMMON_H_

#include <string_view>
#include <utility>

namespace tollgate::base {
// Defined in the tollgate_base library (src/base/ascii.h, the one ASCII
// case-insensitive compare), which tollgate::tollgate links; declared here
// because src/base's headers are not installed.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
}  // namespace tollgate::base

namespace tollgate::middleware {

// Splits a request-target into path and raw query ("/a?b=1" -> "/a", "b=1").
inline std::pair<std::string_view, std::string_view> SplitTarget(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

// ASCII case-insensitive equality (header names): the one in src/base/ascii.h.
using base::EqualsIgnoreCase;

}  // namespace tollgate::middleware

#endif  // TOLLGATE_MIDDLEWARE_COMMON_H_
