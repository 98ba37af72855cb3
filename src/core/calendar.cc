#include "tollgate/calendar.h"

namespace tollgate {
namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kNs = 1'000'000'000;
constexpr int64_t kFirstMonday = 4;  // 1970-01-05, days since the epoch

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

std::string_view CalendarUnitName(CalendarUnit u) {
  switch (u) {
    case CalendarUnit::kDay:
      return "day";
    case CalendarUnit::kWeek:
      return "week";
    case CalendarUnit::kMonth:
      return "month";
  }
  return "unknown";
}

bool ParseCalendarUnit(std::string_view name, CalendarUnit* out) {
  for (CalendarUnit u : {CalendarUnit::kDay, CalendarUnit::kWeek, CalendarUnit::kMonth}) {
    if (CalendarUnitName(u) == name) {
      *out = u;
      return true;
    }
  }
  return false;
}

int64_t Calendar::max_window_ns() const {
  switch (unit_) {
    case CalendarUnit::kDay:
      return 25 * 3600 * kNs;
    case CalendarUnit::kWeek:
      return (7 * kDay + 3600) * kNs;
    case CalendarUnit::kMonth:
      break;
  }
  return (31 * kDay + 3600) * kNs;
}

int64_t Calendar::StartSeconds(int64_t index) const {
  int64_t local_day = 0;
  switch (unit_) {
    case CalendarUnit::kDay:
      local_day = index;
      break;
    case CalendarUnit::kWeek:
      local_day = kFirstMonday + 7 * index;
      break;
    case CalendarUnit::kMonth: {
      const int64_t year = 1970 + FloorDiv(index, 12);
      const int month = static_cast<int>(index - 12 * FloorDiv(index, 12)) + 1;
      local_day = DaysFromCivil(year, month, 1);
      break;
    }
  }
  return zone_.FirstInstantAtOrAfter(local_day * kDay);
}

Calendar::Window Calendar::ByIndex(int64_t index) const {
  return {index, StartSeconds(index) * kNs, StartSeconds(index + 1) * kNs};
}

Calendar::Window Calendar::At(int64_t now_ns) const {
  const int64_t t = FloorDiv(now_ns, kNs);
  const int64_t local_day = FloorDiv(t + zone_.OffsetAt(t), kDay);
  int64_t index = local_day;
  if (unit_ == CalendarUnit::kWeek) {
    index = FloorDiv(local_day - kFirstMonday, 7);
  } else if (unit_ == CalendarUnit::kMonth) {
    int64_t year;
    int month, day;
    CivilFromDays(local_day, &year, &month, &day);
    index = (year - 1970) * 12 + (month - 1);
  }
  // The local date says which window; the boundaries decide at the edges (a
  // fall-back hour that repeats the end of the previous day after midnight,
  // a day that a zone skipped entirely).
  int64_t start = StartSeconds(index), end = StartSeconds(index + 1);
  for (int i = 0; i < 4 && t >= end; ++i) {
    ++index;
    start = end;
    end = StartSeconds(index + 1);
  }
  for (int i = 0; i < 4 && t < start; ++i) {
    --index;
    end = start;
    start = StartSeconds(index);
  }
  return {index, start * kNs, end * kNs};
}

std::string Calendar::ToString() const {
  return std::string(CalendarUnitName(unit_)) + "@" + zone_.name();
}

}  // namespace tollgate
