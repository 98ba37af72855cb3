// Fuzz target: path normalisation (NormalizePath, src/base/request.cc), the
// one spelling of a path that rules match and key on, and the query lookup.
//
// Input: a request target ("/a/../b?x=1"), as a client sends it.
// Properties:
//   - idempotent: NormalizePath(NormalizePath(p)) == NormalizePath(p), so no
//     spelling normalises to something a second decode (an upstream's) reads
//     as another path;
//   - a path starting with '/' normalises to one starting with '/', without
//     an empty, "." or ".." segment, '?' or '#';
//   - every '%' of the result starts an escape of two upper-case hex digits
//     that is not an unreserved character (those are decoded);
//   - QueryParam finds a parameter the query spells plainly.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "policy/request_context.h"
#include "tollgate/request.h"

namespace {

using tollgate::fuzz::Quote;

bool UpperHex(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

bool Unreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

void CheckNormal(std::string_view in, const std::string& out) {
  const std::string again = tollgate::NormalizePath(out);
  FUZZ_CHECK(again == out,
             "not idempotent: " + Quote(in) + " -> " + Quote(out) + " -> " + Quote(again));
  FUZZ_CHECK(out.find_first_of("?#") == std::string::npos, "query or fragment kept: " + Quote(out));
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != '%') continue;
    FUZZ_CHECK(i + 2 < out.size() && UpperHex(out[i + 1]) && UpperHex(out[i + 2]),
               "a '%' that starts no upper-case escape: " + Quote(in) + " -> " + Quote(out));
    const int hi = out[i + 1] <= '9' ? out[i + 1] - '0' : out[i + 1] - 'A' + 10;
    const int lo = out[i + 2] <= '9' ? out[i + 2] - '0' : out[i + 2] - 'A' + 10;
    FUZZ_CHECK(!Unreserved(static_cast<unsigned char>(hi * 16 + lo)),
               "an unreserved character left encoded: " + Quote(out));
  }
  const std::string_view path = in.substr(0, in.find_first_of("?#"));
  if (path.empty() || path.front() != '/') return;
  FUZZ_CHECK(!out.empty() && out.front() == '/', "lost the leading '/': " + Quote(out));
  FUZZ_CHECK(out.find("//") == std::string::npos, "an empty segment: " + Quote(out));
  size_t start = 1;
  while (start <= out.size()) {
    const size_t end = std::min(out.find('/', start), out.size());
    const std::string_view seg(out.data() + start, end - start);
    FUZZ_CHECK(seg != "." && seg != "..", "a dot segment: " + Quote(in) + " -> " + Quote(out));
    start = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  const std::string normal = tollgate::NormalizePath(target);
  CheckNormal(target, normal);

  // The query half, as the policy's query: sources read it.
  const size_t q = target.find('?');
  if (q != std::string_view::npos) {
    tollgate::RequestView view;
    view.query = target.substr(q + 1);
    const std::string_view query = view.query;
    // The first plain "name=value" pair must be found with its value.
    const std::string_view first = query.substr(0, query.find('&'));
    const size_t eq = first.find('=');
    const std::string_view name = first.substr(0, eq);
    if (!name.empty() && name.find_first_of("%+") == std::string_view::npos) {
      const auto got = view.QueryParam(name);
      FUZZ_CHECK(got.has_value(), "query parameter not found: " + Quote(name));
      const std::string_view value =
          eq == std::string_view::npos ? std::string_view() : first.substr(eq + 1);
      if (value.find_first_of("%+") == std::string_view::npos) {
        FUZZ_CHECK(*got == value, "query value changed: " + Quote(value) + " -> " + Quote(*got));
      }
    }
  }
  return 0;
}
