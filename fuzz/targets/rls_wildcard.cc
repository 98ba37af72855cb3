// Fuzz target: wildcard descriptor values (src/rls/rls_wildcard.cc), the
// `*` patterns of envoyproxy/ratelimit configs matched against request values
// that Envoy sends from client headers and paths.
//
// Input: a pattern, a NUL byte, a value (no NUL: the pattern is all of it and
// the value empty).
// Properties:
//   - WildcardMatch agrees with a reference matcher (dynamic programming over
//     pattern x value, obviously right and obviously polynomial);
//   - a pattern without `*` matches only itself; `*` alone matches everything;
//   - the pattern's own text, with each `*` read as a literal, always matches.
// The matcher never backtracks, so a slow input (libFuzzer's -timeout) is a bug.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "rls/rls_wildcard.h"

namespace {

bool Reference(std::string_view pattern, std::string_view value) {
  // row[j]: pattern[0, i) matches value[0, j).
  std::vector<char> row(value.size() + 1, 0), next(value.size() + 1, 0);
  row[0] = 1;
  for (char p : pattern) {
    next.assign(value.size() + 1, 0);
    for (size_t j = 0; j <= value.size(); ++j) {
      if (p == '*') {
        next[j] = row[j] || (j > 0 && next[j - 1]);
      } else {
        next[j] = j > 0 && row[j - 1] && value[j - 1] == p;
      }
    }
    row.swap(next);
  }
  return row[value.size()] != 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tollgate::fuzz::Quote;
  using tollgate::rls::WildcardMatch;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view pattern = in.substr(0, nul);
  const std::string_view value = nul == std::string_view::npos ? "" : in.substr(nul + 1);
  const bool got = WildcardMatch(pattern, value);
  FUZZ_CHECK(got == Reference(pattern, value),
             "disagrees with the reference: " + Quote(pattern) + " ~ " + Quote(value));
  if (!tollgate::rls::IsWildcard(pattern)) {
    FUZZ_CHECK(got == (pattern == value), "a plain value matched another: " + Quote(pattern));
  }
  FUZZ_CHECK(WildcardMatch("*", value), "`*` refused " + Quote(value));
  FUZZ_CHECK(WildcardMatch(pattern, pattern), "a pattern refused its own text " + Quote(pattern));
  return 0;
}
