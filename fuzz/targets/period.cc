// Fuzz target: period strings (src/core/period.cc), the text of a limit's
// period and a quota's window in policies ("1h", "30d", "1h30m").
//
// Input: the text.
// Properties:
//   - an error xor a period in (0, 366 days];
//   - an error names a byte offset within the text (or its length bound);
//   - FormatPeriod of a period parses back to the same nanoseconds, and is
//     never longer than the bound.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "tollgate/period.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tollgate::fuzz::Quote;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto period = tollgate::ParsePeriod(text);
  if (!period.ok()) {
    const std::string m = period.status().message();
    FUZZ_CHECK(m.starts_with("at byte "), "error without a place: " + m);
    const size_t at = std::stoul(m.substr(8));
    FUZZ_CHECK(at <= text.size() && at <= tollgate::kMaxPeriodText,
               "offset out of range for " + Quote(text) + ": " + m);
    return 0;
  }
  FUZZ_CHECK(period->count() > 0 && *period <= tollgate::kMaxPeriod,
             "out of range: " + Quote(text));
  const std::string formatted = tollgate::FormatPeriod(*period);
  FUZZ_CHECK(formatted.size() <= tollgate::kMaxPeriodText, "formatted too long: " + formatted);
  const auto back = tollgate::ParsePeriod(formatted);
  FUZZ_CHECK(back.ok() && *back == *period,
             "no round trip: " + Quote(text) + " -> " + Quote(formatted));
  return 0;
}
