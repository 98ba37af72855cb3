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
  return zone_.FirstInstantAtOrAfter(FirstLocalDay(index) * kDay);
}

int64_t Calendar::FirstLocalDay(int64_t index) const {
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
  return local_day;
}

Calendar::Window Calendar::ByIndex(int64_t index) const {
  return {index, StartSeconds(index) * kNs, StartSeconds(index + 1) * kNs};
}

Calendar::Window Calendar::At(int64_t now_ns) const {
  const int64_t t = FloorDiv(now_ns, kNs);
  int64_t offset, from, to;
  const bool constant = zone_.ConstantAround(t, &offset, &from, &to);
  if (!constant) offset = zone_.OffsetAt(t);
  const int64_t index = IndexOfLocalDay(FloorDiv(t + offset, kDay));
  if (constant) {
    // The common case: one offset over the whole window, and no earlier
    // offset (at most 52 h apart) that could reach the window's first local
    // time before `from`.
    const int64_t start = FirstLocalDay(index) * kDay - offset;
    const int64_t end = FirstLocalDay(index + 1) * kDay - offset;
    if (start - from >= 2 * kMaxUtcOffset && end < to) return {index, start * kNs, end * kNs};
  }
  return Settle(index, t);
}

int64_t Calendar::IndexOfLocalDay(int64_t local_day) const {
  int64_t index = local_day;
  if (unit_ == CalendarUnit::kWeek) {
    index = FloorDiv(local_day - kFirstMonday, 7);
  } else if (unit_ == CalendarUnit::kMonth) {
    int64_t year;
    int month, day;
    CivilFromDays(local_day, &year, &month, &day);
    index = (year - 1970) * 12 + (month - 1);
  }
  return index;
}

Calendar::Window Calendar::Settle(int64_t index, int64_t t) const {
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
