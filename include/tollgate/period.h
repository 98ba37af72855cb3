// Period strings: the length of a limit's period or a quota's window, written
// the way people say it ("1h", "30d", "1w", "13s", "1h30m"), parsed into exact
// integer nanoseconds.
//
// Grammar: one or more `<digits><unit>` terms, no spaces, no signs, no
// fractions (so every period is a whole number of nanoseconds without any
// rounding); units ns, us, ms, s, m, h, d (86400 s), w (7 d). A term's digits
// are at most 18 long, the text at most kMaxPeriodText bytes, and the sum at
// most kMaxPeriod (366 days) and above zero. Calendar lengths (a month, a
// year) are not periods: they differ from one to the next; a quota aligned to
// the calendar says so with its `align` setting (docs/configuration.md).
//
// Errors name the byte offset and why ("at byte 2: unknown unit \"x\" ...").
// Pure functions; thread-safe.
#ifndef TOLLGATE_PERIOD_H_
#define TOLLGATE_PERIOD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/status.h"

namespace tollgate {

inline constexpr Nanos kMaxPeriod{366LL * 86400 * 1'000'000'000};
inline constexpr size_t kMaxPeriodText = 64;

// The period `text` names, or kInvalidArgument saying where and why.
Result<Nanos> ParsePeriod(std::string_view text);

// The shortest text ParsePeriod reads back as `period` ("1w", "1h30m", "1500ms").
// `period` must be positive.
std::string FormatPeriod(Nanos period);

}  // namespace tollgate

#endif  // TOLLGATE_PERIOD_H_
