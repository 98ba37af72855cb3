// TimeZone: an IANA time zone read from a TZif file (RFC 8536, versions 2 to
// 4, as Debian's tzdata installs them under /usr/share/zoneinfo), for
// calendar-aligned quotas. libstdc++ 12 has no std::chrono tzdb, so this is
// our own small reader.
//
// What it answers: the UTC offset in effect at an instant, and the earliest
// instant at which the local wall clock reads a given local time or later
// (the start of a local day even where midnight falls into a DST gap). Times
// after the file's last transition follow the POSIX TZ rule in its footer
// ("CET-1CEST,M3.5.0,M10.5.0/3"); times before the first take time type 0.
//
// Files are untrusted input: FromTzif checks every count against the bytes
// present and fixed bounds (kMaxTzifBytes, kMaxTransitions, kMaxTypes), every
// type index, offset range and order of transitions, and the footer's
// grammar; errors say where ("at byte 44: ...", "footer at byte 3: ...").
// Leap-second ("right/") zones are refused. Load() reads only names made of
// the characters tzdata uses, with no "." component, below `dir`.
//
// All times are whole seconds since the Unix epoch (UTC); offsets are seconds
// east of UTC. Thread safety: immutable after creation; share freely.
#ifndef TOLLGATE_TIME_ZONE_H_
#define TOLLGATE_TIME_ZONE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/status.h"

namespace tollgate {

inline constexpr size_t kMaxTzifBytes = 256 * 1024;
inline constexpr size_t kMaxTransitions = 20000;
inline constexpr size_t kMaxTypes = 256;
inline constexpr size_t kMaxZoneName = 64;
inline constexpr int64_t kMaxUtcOffset = 26 * 3600;  // RFC 8536 allows -89999..93599

// A POSIX TZ rule (a TZif footer): standard offset, and optionally a DST
// offset with the rule's start and end. Parsed from text; offsets east of UTC.
struct PosixTzRule {
  struct Date {
    enum Kind : uint8_t { kJulian1, kJulian0, kMonthWeekDay } kind = kMonthWeekDay;
    int day = 0;  // Jn: 1..365; n: 0..365; M: day of week 0..6 (Sunday 0)
    int month = 0, week = 0;
    int64_t time = 7200;  // seconds after local midnight, -167h..167h
  };
  int64_t std_offset = 0;
  bool has_dst = false;
  int64_t dst_offset = 0;
  Date start, end;

  // `text` parsed, or kInvalidArgument naming the byte offset and why.
  static Result<PosixTzRule> Parse(std::string_view text);
  // The offset this rule gives at `t`.
  int64_t OffsetAt(int64_t t) const;
  // The rule's changes of offset in `year` (UTC seconds), in time order; empty
  // without DST.
  void TransitionsIn(int64_t year, std::vector<std::pair<int64_t, int64_t>>* out) const;
};

class TimeZone {
 public:
  // A zone from the bytes of a TZif file; `name` is for messages and ToString.
  static Result<TimeZone> FromTzif(std::string_view name, std::string_view bytes);
  // The zone `name` ("Europe/Berlin", "UTC") from the TZif file dir/name.
  static Result<TimeZone> Load(std::string_view name,
                               const std::string& dir = "/usr/share/zoneinfo");
  // A fixed offset, no file (tests, and "UTC" without tzdata).
  static TimeZone Fixed(std::string name, int64_t offset);

  const std::string& name() const { return name_; }
  // Seconds east of UTC in effect at `t`.
  int64_t OffsetAt(int64_t t) const;
  // The earliest instant t with t + OffsetAt(t) >= local, i.e. the first
  // moment the wall clock shows `local` or later (a gap's end when `local`
  // is skipped; the first of two when it repeats).
  int64_t FirstInstantAtOrAfter(int64_t local) const;

  // Whether the offset is constant over [*from, *to), a span holding `t`
  // inside the file's transitions (or a zone without changes); false past the
  // last transition, where the footer rule decides (callers take the general
  // path). A fast path for Calendar::At.
  bool ConstantAround(int64_t t, int64_t* offset, int64_t* from, int64_t* to) const;

  friend bool operator==(const TimeZone& a, const TimeZone& b) {
    return a.name_ == b.name_ && a.times_ == b.times_ && a.offsets_ == b.offsets_ &&
           a.initial_offset_ == b.initial_offset_ && a.has_rule_ == b.has_rule_;
  }

 private:
  TimeZone() = default;
  // Offset changes (time, new offset) in (from, to], the footer's included.
  void ChangesIn(int64_t from, int64_t to, std::vector<std::pair<int64_t, int64_t>>* out) const;

  std::string name_;
  std::vector<int64_t> times_;    // transition instants, strictly increasing
  std::vector<int64_t> offsets_;  // offset from times_[i] on
  int64_t initial_offset_ = 0;    // before times_[0] (time type 0)
  bool has_rule_ = false;         // after times_.back(): rule_, else offsets_.back()
  PosixTzRule rule_;
};

// Days since 1970-01-01 of a proleptic Gregorian date, and back.
int64_t DaysFromCivil(int64_t year, int month, int day);
void CivilFromDays(int64_t days, int64_t* year, int* month, int* day);

}  // namespace tollgate

#endif  // TOLLGATE_TIME_ZONE_H_
