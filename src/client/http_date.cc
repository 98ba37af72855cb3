// HTTP-date (RFC 9110 §5.6.7) and Retry-After (§10.2.3), without the C library's
// locale- and timezone-dependent functions.
#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "tollgate/client.h"

namespace tollgate {
namespace {

constexpr std::array<std::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 7> kLongDays = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                                       "Thursday", "Friday", "Saturday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDaysIn[m - 1];
}

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool Lit(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }
  // Exactly `n` digits (or 1..n when `at_least_one`).
  bool Digits(int n, int64_t* out, bool at_least_one = false) {
    int64_t v = 0;
    int got = 0;
    while (got < n && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      ++got;
    }
    if (got == 0 || (!at_least_one && got != n)) return false;
    *out = v;
    return true;
  }
  bool OneOf(std::span<const std::string_view> names, int* index) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (Lit(names[i])) {
        *index = static_cast<int>(i);
        return true;
      }
    }
    return false;
  }
  bool End() const { return pos_ == s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

std::optional<int64_t> Assemble(int64_t year, int month_index, int64_t day, int64_t hour,
                                int64_t minute, int64_t second) {
  if (year < 1970 || year > 9999) return std::nullopt;
  const unsigned month = static_cast<unsigned>(month_index + 1);
  if (day < 1 || day > DaysInMonth(year, month)) return std::nullopt;
  if (hour > 23 || minute > 59 || second > 60) return std::nullopt;  // 60: a leap second
  return DaysFromCivil(year, month, static_cast<unsigned>(day)) * 86400 + hour * 3600 +
         minute * 60 + second;
}

// "06 Nov 1994 08:49:37 GMT" after "Sun, " (IMF-fixdate).
std::optional<int64_t> ParseImfFixdate(Cursor& c) {
  int64_t day, year, hour, minute, second;
  int month;
  if (!c.Digits(2, &day) || !c.Lit(" ") || !c.OneOf(kMonths, &month) || !c.Lit(" ") ||
      !c.Digits(4, &year) || !c.Lit(" ") || !c.Digits(2, &hour) || !c.Lit(":") ||
      !c.Digits(2, &minute) || !c.Lit(":") || !c.Digits(2, &second) || !c.Lit(" GMT") || !c.End())
    return std::nullopt;
  return Assemble(year, month, day, hour, minute, second);
}

// "06-Nov-94 08:49:37 GMT" after "Sunday, " (RFC 850). Two-digit years that
// would be more than 50 years in the future mean the previous century (RFC 9110);
// without a clock we take 70..99 as 19xx and 00..69 as 20xx.
std::optional<int64_t> ParseRfc850(Cursor& c) {
  int64_t day, year, hour, minute, second;
  int month;
  if (!c.Digits(2, &day) || !c.Lit("-") || !c.OneOf(kMonths, &month) || !c.Lit("-") ||
      !c.Digits(2, &year) || !c.Lit(" ") || !c.Digits(2, &hour) || !c.Lit(":") ||
      !c.Digits(2, &minute) || !c.Lit(":") || !c.Digits(2, &second) || !c.Lit(" GMT") || !c.End())
    return std::nullopt;
  year += year >= 70 ? 1900 : 2000;
  return Assemble(year, month, day, hour, minute, second);
}

}  // namespace

std::optional<int64_t> ParseHttpDate(std::string_view text) {
  if (text.size() > 64) return std::nullopt;
  {
    Cursor c(text);
    int dow;
    if (c.OneOf(kDays, &dow) && c.Lit(", ")) {
      if (auto t = ParseImfFixdate(c)) return t;
    }
  }
  {
    Cursor c(text);
    int dow;
    if (c.OneOf(kLongDays, &dow) && c.Lit(", ")) {
      if (auto t = ParseRfc850(c)) return t;
    }
  }
  {
    // asctime: "Sun Nov  6 08:49:37 1994" (day is space-padded).
    Cursor c(text);
    int dow, month;
    int64_t day, year, hour, minute, second;
    if (c.OneOf(kDays, &dow) && c.Lit(" ") && c.OneOf(kMonths, &month) && c.Lit(" ")) {
      const bool padded = c.Lit(" ");
      if (c.Digits(padded ? 1 : 2, &day) && c.Lit(" ") && c.Digits(2, &hour) && c.Lit(":") &&
          c.Digits(2, &minute) && c.Lit(":") && c.Digits(2, &second) && c.Lit(" ") &&
          c.Digits(4, &year) && c.End())
        return Assemble(year, month, day, hour, minute, second);
    }
  }
  return std::nullopt;
}

std::string FormatHttpDate(int64_t unix_seconds) {
  int64_t days = unix_seconds / 86400;
  int64_t rem = unix_seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  const int64_t dow = ((days % 7) + 7 + 4) % 7;  // 1970-01-01 was a Thursday
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s, %02u %s %04lld %02lld:%02lld:%02lld GMT",
                std::string(kDays[dow]).c_str(), d, std::string(kMonths[m - 1]).c_str(),
                static_cast<long long>(y), static_cast<long long>(rem / 3600),
                static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60));
  return buf;
}

std::optional<Nanos> ParseRetryAfter(std::string_view value, int64_t now_wall_ns) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (value.front() >= '0' && value.front() <= '9') {
    const int64_t cap = std::chrono::duration_cast<std::chrono::seconds>(kMaxRetryAfter).count();
    int64_t seconds = 0;
    for (char c : value) {
      if (c < '0' || c > '9') return std::nullopt;
      seconds = std::min<int64_t>(cap, seconds * 10 + (c - '0'));
    }
    return Nanos(std::chrono::seconds(seconds));
  }
  const auto when = ParseHttpDate(value);
  if (!when) return std::nullopt;
  // Dates run to the year 9999: compare in seconds first, so that a date far
  // from now cannot overflow nanoseconds.
  const int64_t cap_s = std::chrono::duration_cast<std::chrono::seconds>(kMaxRetryAfter).count();
  const int64_t now_s = now_wall_ns / 1'000'000'000;
  if (*when <= now_s - 1) return Nanos(0);
  if (*when >= now_s + cap_s + 1) return kMaxRetryAfter;
  const int64_t wait_ns = *when * 1'000'000'000 - now_wall_ns;
  if (wait_ns <= 0) return Nanos(0);
  return std::min(Nanos(wait_ns), kMaxRetryAfter);
}

}  // namespace tollgate
