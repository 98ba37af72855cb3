// Fuzz target: EscapeLogText / UnescapeLogText (tollgate/log_text.h), what every
// client-controlled string in a tollgated log line goes through
// (Logger::Client).
//
// Input: any bytes, as a client puts them in a path or a header value.
// Properties:
//   - the escaped text is valid UTF-8 without C0 controls, DEL, C1 controls
//     (U+0080..U+009F), bidi controls (U+061C, U+200E/F, U+202A..U+202E,
//     U+2066..U+2069) or U+2028/U+2029;
//   - at most 4 bytes out per byte in;
//   - reversible: UnescapeLogText(EscapeLogText(s)) == s;
//   - Logger::Client is the escape of the first kMaxClientString bytes.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "server/log.h"

namespace {

using tollgate::fuzz::Quote;

// An independent UTF-8 walk (not the one under test): the code points of a
// valid text, or false.
bool Decode(std::string_view s, std::u32string* out) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    char32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    out->push_back(cp);
    i += n;
  }
  return true;
}

bool Forbidden(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string out = tollgate::EscapeLogText(in);
  std::u32string cps;
  FUZZ_CHECK(Decode(out, &cps), "not valid UTF-8: " + Quote(in) + " -> " + Quote(out));
  for (char32_t cp : cps) {
    FUZZ_CHECK(!Forbidden(cp),
               "code point " + std::to_string(uint32_t(cp)) + " kept: " + Quote(in));
  }
  FUZZ_CHECK(out.size() <= 4 * in.size(), "longer than 4 bytes per byte: " + Quote(in));
  const std::string back = tollgate::UnescapeLogText(out);
  FUZZ_CHECK(back == in,
             "not reversible: " + Quote(in) + " -> " + Quote(out) + " -> " + Quote(back));
  const std::string client = tollgate::server::Logger::Client(in);
  FUZZ_CHECK(
      client == tollgate::EscapeLogText(in.substr(0, tollgate::server::Logger::kMaxClientString)),
      "Logger::Client is not the bounded escape: " + Quote(in));
  return 0;
}
