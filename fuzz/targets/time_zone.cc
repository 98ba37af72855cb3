// Fuzz target: TZif files (src/core/time_zone.cc), which calendar quotas read
// from /usr/share/zoneinfo: untrusted bytes like any other file.
//
// Input: a TZif file (seeds: real zone files from Debian's tzdata), or, when
// the first byte is '@', a POSIX TZ footer rule after it.
// Properties:
//   - an error xor a zone; a file's error names a byte ("at byte N") inside
//     the input, a rule's error its byte ("footer at byte N");
//   - a zone's offsets stay within 26 h at every probed instant;
//   - FirstInstantAtOrAfter(local) is an instant whose wall clock shows
//     `local` or later, and the second before it shows less;
//   - a calendar day / month window holds its instant, its successor starts
//     where it ends, and no window is longer than the calendar's maximum (plus what a
//     zone's own jumps of offset add).
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "tollgate/calendar.h"
#include "tollgate/time_zone.h"

namespace {

constexpr int64_t kNs = 1'000'000'000;

void CheckPlace(const std::string& m, std::string_view marker, size_t size) {
  const size_t at = m.find(marker);
  FUZZ_CHECK(at != std::string::npos, "error without a place: " + m);
  const size_t n = std::stoul(m.substr(at + marker.size()));
  FUZZ_CHECK(n <= size, "place out of range: " + m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tollgate::TimeZone;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (!bytes.empty() && bytes[0] == '@') {
    auto rule = tollgate::PosixTzRule::Parse(bytes.substr(1));
    if (!rule.ok()) {
      CheckPlace(rule.status().message(), "at byte ", size);
      return 0;
    }
    for (int64_t t : {int64_t{0}, int64_t{1'700'000'000}, int64_t{4'102'444'800}}) {
      const int64_t off = rule->OffsetAt(t);
      FUZZ_CHECK(off == rule->std_offset || off == rule->dst_offset, "offset not of the rule");
    }
    return 0;
  }
  auto zone = TimeZone::FromTzif("fuzz", bytes);
  if (!zone.ok()) {
    CheckPlace(zone.status().message(), "at byte ", size);
    return 0;
  }
  // Probe instants from the file's own bytes and a fixed spread.
  uint64_t seed = 1469598103934665603ull;
  for (unsigned char c : bytes.substr(0, 64)) seed = (seed ^ c) * 1099511628211ull;
  for (int i = 0; i < 16; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t t = static_cast<int64_t>(seed % 8'000'000'000ull) - 2'000'000'000;
    const int64_t off = zone->OffsetAt(t);
    FUZZ_CHECK(off >= -tollgate::kMaxUtcOffset && off <= tollgate::kMaxUtcOffset,
               "offset beyond 26 h at " + std::to_string(t));
    const int64_t local = t + off;
    const int64_t first = zone->FirstInstantAtOrAfter(local);
    FUZZ_CHECK(first + zone->OffsetAt(first) >= local, "first instant before local");
    FUZZ_CHECK(first - 1 + zone->OffsetAt(first - 1) < local, "an earlier instant qualifies");
    if (t < 0) continue;  // calendar quotas run on the wall clock since 1970
    for (auto unit : {tollgate::CalendarUnit::kDay, tollgate::CalendarUnit::kMonth}) {
      const tollgate::Calendar cal(unit, *zone);
      const auto w = cal.At(t * kNs);
      FUZZ_CHECK(w.start_ns <= t * kNs && t * kNs < w.end_ns,
                 "window does not hold its instant " + std::to_string(t));
      FUZZ_CHECK(w.end_ns - w.start_ns <= cal.max_window_ns() + 2 * tollgate::kMaxUtcOffset * kNs,
                 "window too long at " + std::to_string(t));
      FUZZ_CHECK(cal.ByIndex(w.index + 1).start_ns == w.end_ns, "windows not contiguous");
    }
  }
  return 0;
}
