// Fuzz target: body:<JSON pointer> sources (src/policy/request_fields.cc):
// the pointer's RFC 6901 parsing, the bounded JSON body parse and the lookup.
//
// Input: a pointer, '\n', then the body.
// Properties:
//   - a parsed pointer has at most kMaxPointerTokens tokens, and writing its
//     tokens back with ~0 / ~1 escapes gives the text it was parsed from;
//   - a body deeper than kMaxBodyDepth or larger than kMaxBodyKeyBytes never
//     parses; a parsed body is valid JSON (dumps and parses again);
//   - a value found is what the document holds there: a string as is, else
//     the scalar's JSON text; never for an object, array or null.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_depth.h"
#include "fuzz_input.h"
#include "policy/request_fields.h"

namespace {

using tollgate::fuzz::Quote;

std::string Escape(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  const std::string_view pointer_text = in.Until('\n');
  const std::string_view body = in.Rest();

  tollgate::JsonPointer pointer;
  std::string why;
  const bool pointer_ok = tollgate::ParseJsonPointer(pointer_text, &pointer, &why);
  if (pointer_ok) {
    FUZZ_CHECK(pointer.tokens.size() <= tollgate::kMaxPointerTokens, "too many tokens");
    std::string back;
    for (const std::string& t : pointer.tokens) back += "/" + Escape(t);
    FUZZ_CHECK(back == pointer_text,
               "pointer round trip: " + Quote(pointer_text) + " -> " + Quote(back));
  } else {
    FUZZ_CHECK(!why.empty(), "a refused pointer without a reason");
  }

  const auto doc = tollgate::ParseJsonBody(body);
  if (!doc) return 0;
  FUZZ_CHECK(body.size() <= tollgate::kMaxBodyKeyBytes, "an oversized body parsed");
  FUZZ_CHECK(tollgate::JsonNestingDepth(body) <= tollgate::kMaxBodyDepth, "a too deep body parsed");
  const std::string dumped = doc->dump();
  FUZZ_CHECK(tollgate::ParseJsonBody(dumped).has_value() || dumped.size() > body.size(),
             "a parsed body does not dump to JSON: " + Quote(dumped));
  if (!pointer_ok) return 0;
  const auto value = tollgate::JsonPointerValue(*doc, pointer);
  if (!value) return 0;
  const nlohmann::json* at = &*doc;
  for (const std::string& t : pointer.tokens) {
    at = at->is_object() ? &(*at)[t] : &(*at)[static_cast<size_t>(std::stoul(t))];
  }
  FUZZ_CHECK(at->is_string() || at->is_number() || at->is_boolean(),
             "a value of a non-scalar: " + Quote(*value));
  FUZZ_CHECK(*value == (at->is_string() ? at->get<std::string>() : at->dump()),
             "a value other than the document's: " + Quote(*value));
  return 0;
}
