// Fuzz target: path templates for path_param:<name> (ParsePathTemplate,
// MatchPathTemplate, src/policy/request_fields.cc).
//
// Input: a template, '\n', then a path.
// Properties:
//   - a parsed template has 1 to kMaxTemplateSegments segments, each
//     parameter name once;
//   - the path built from the template (each parameter replaced by "v<i>")
//     matches it, and each parameter reads back its "v<i>";
//   - a path that matches has exactly the template's segment count, and a
//     parameter's value is one non-empty segment without '/'.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "policy/request_fields.h"

using tollgate::fuzz::Quote;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const std::string_view text = in.Until('\n');
  const std::string_view path = in.Rest();
  tollgate::PathTemplate t;
  std::string why;
  if (!tollgate::ParsePathTemplate(text, &t, &why)) {
    FUZZ_CHECK(!why.empty(), "a refused template without a reason");
    return 0;
  }
  FUZZ_CHECK(!t.segments.empty() && t.segments.size() <= tollgate::kMaxTemplateSegments,
             "segment count of " + Quote(text));
  std::string built;
  for (size_t i = 0; i < t.segments.size(); ++i) {
    built += "/" + (t.is_param[i] ? "v" + std::to_string(i) : t.segments[i]);
  }
  for (size_t i = 0; i < t.segments.size(); ++i) {
    if (!t.is_param[i]) continue;
    FUZZ_CHECK(t.Find(t.segments[i]) == static_cast<int>(i), "a parameter twice: " + Quote(text));
    std::string_view v;
    FUZZ_CHECK(tollgate::MatchPathTemplate(t, built, static_cast<int>(i), &v),
               "its own path does not match: " + Quote(text) + " " + Quote(built));
    FUZZ_CHECK(v == "v" + std::to_string(i), "wrong parameter value: " + Quote(v));
  }
  for (size_t i = 0; i < t.segments.size(); ++i) {
    std::string_view v;
    if (!tollgate::MatchPathTemplate(t, path, static_cast<int>(i), &v)) return 0;
    if (t.is_param[i]) {
      FUZZ_CHECK(!v.empty() && v.find('/') == std::string_view::npos,
                 "a parameter value that is no segment: " + Quote(v));
    }
  }
  size_t slashes = 0;
  for (char c : path) slashes += c == '/';
  FUZZ_CHECK(slashes == t.segments.size(), "a match with another segment count: " + Quote(path));
  return 0;
}
