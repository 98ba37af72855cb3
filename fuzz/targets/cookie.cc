// Fuzz target: Cookie field parsing for cookie:<name> sources (CookieValue,
// src/policy/request_fields.cc).
//
// Input: a cookie name, '\n', then Cookie field values separated by '\n'.
// Properties:
//   - a value found is non-empty, at most kMaxCookieValueBytes, lies inside
//     one of the fields and holds no ';' (a pair never spills into the next);
//   - it is the first pair named `name`: no earlier pair of the same name;
//   - a pair "name=value" put in front of the fields is always the answer
//     (for a valid name and a plain value), whatever follows.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "policy/request_fields.h"

namespace {

using tollgate::fuzz::Quote;

bool Inside(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const std::string_view name = in.Until('\n');
  std::vector<std::string_view> fields;
  while (!in.empty() && fields.size() < 64) fields.push_back(in.Until('\n'));

  const auto value = tollgate::CookieValue(fields, name);
  if (value) {
    FUZZ_CHECK(!value->empty() && value->size() <= tollgate::kMaxCookieValueBytes,
               "value size: " + Quote(*value));
    FUZZ_CHECK(value->find(';') == std::string_view::npos, "a ';' in a value: " + Quote(*value));
    bool inside = false;
    for (std::string_view f : fields) inside = inside || Inside(*value, f);
    FUZZ_CHECK(inside, "a value from outside the fields: " + Quote(*value));
  }

  if (tollgate::ValidCookieName(name)) {
    const std::string first = std::string(name) + "=front-value";
    std::vector<std::string_view> with_front{first};
    with_front.insert(with_front.end(), fields.begin(), fields.end());
    const auto front = tollgate::CookieValue(with_front, name);
    FUZZ_CHECK(front && *front == "front-value", "the first pair was not taken for " + Quote(name));
  }
  return 0;
}
