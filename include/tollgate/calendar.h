// Calendar: the windows of a calendar-aligned quota ("per calendar day in
// Europe/Berlin", "per calendar month in America/New_York").
//
// A window runs from the first instant of a local calendar day, ISO week
// (Monday to Sunday) or month in the zone to the first instant of the next,
// so a day is 23, 24 or 25 hours long across DST changes, a month 28 to 31
// days; a local midnight that a DST gap skips starts its day at the gap's end.
// Windows are numbered by a consecutive index (local days, weeks or months
// since 1970-01), which is what a store keeps beside the count: every store
// and every instance of a fleet computes the same index and boundaries for the
// same instant from the same tzdata.
//
// Times are Unix-epoch nanoseconds (wall clock, UTC). Thread safety:
// immutable; share by shared_ptr (Limit does).
#ifndef TOLLGATE_CALENDAR_H_
#define TOLLGATE_CALENDAR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tollgate/status.h"
#include "tollgate/time_zone.h"

namespace tollgate {

enum class CalendarUnit : uint8_t { kDay, kWeek, kMonth };

std::string_view CalendarUnitName(CalendarUnit u);  // "day", "week", "month"
bool ParseCalendarUnit(std::string_view name, CalendarUnit* out);

class Calendar {
 public:
  struct Window {
    int64_t index = 0;     // consecutive: the next window is index + 1
    int64_t start_ns = 0;  // first instant of the window
    int64_t end_ns = 0;    // first instant of the next one (> start_ns)
  };

  Calendar(CalendarUnit unit, TimeZone zone) : unit_(unit), zone_(std::move(zone)) {}

  CalendarUnit unit() const { return unit_; }
  const TimeZone& zone() const { return zone_; }
  // The longest a window can be (25 h, 7 d + 1 h, 31 d + 1 h): for display
  // and the rate a quota averages to, never for deciding.
  int64_t max_window_ns() const;

  // The window holding wall-clock instant `now_ns`.
  Window At(int64_t now_ns) const;
  // The window numbered `index`.
  Window ByIndex(int64_t index) const;
  // Start of window `index` in whole seconds (boundaries always are).
  int64_t StartSeconds(int64_t index) const;

  // "month@America/New_York": in logs, explain output and Redis key names.
  std::string ToString() const;

  friend bool operator==(const Calendar& a, const Calendar& b) {
    return a.unit_ == b.unit_ && a.zone_ == b.zone_;
  }

 private:
  int64_t IndexOfLocalDay(int64_t local_day) const;
  int64_t FirstLocalDay(int64_t index) const;  // the local day window `index` starts on
  // The window holding second `t`, from `index` (the local date's) by its boundaries.
  Window Settle(int64_t index, int64_t t) const;

  CalendarUnit unit_;
  TimeZone zone_;
};

}  // namespace tollgate

#endif  // TOLLGATE_CALENDAR_H_
