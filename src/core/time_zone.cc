#include "tollgate/time_zone.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace tollgate {
namespace {

constexpr int64_t kDay = 86400;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

Status ErrorAt(size_t at, const std::string& why) {
  return InvalidArgument("at byte " + std::to_string(at) + ": " + why);
}

// A bounded big-endian reader over the file's bytes.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  size_t pos() const { return pos_; }
  bool Has(size_t n) const { return n <= b_.size() - pos_; }
  int64_t Int(int bytes) {  // signed, 4 or 8 bytes; caller checked Has()
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(b_[pos_++]);
    if (bytes == 4) return static_cast<int32_t>(static_cast<uint32_t>(v));
    return static_cast<int64_t>(v);
  }
  uint8_t Byte() { return static_cast<uint8_t>(b_[pos_++]); }
  void Skip(size_t n) { pos_ += n; }
  std::string_view Rest() const { return b_.substr(pos_); }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

struct Header {
  char version = 0;
  uint32_t isut = 0, isstd = 0, leap = 0, time = 0, type = 0, chars = 0;
};

Result<Header> ReadHeader(Reader& r) {
  const size_t at = r.pos();
  if (!r.Has(44)) return ErrorAt(at, "truncated header (44 bytes needed)");
  if (r.Rest().substr(0, 4) != "TZif") return ErrorAt(at, "no TZif magic");
  r.Skip(4);
  Header h;
  h.version = static_cast<char>(r.Byte());
  r.Skip(15);
  uint32_t* counts[] = {&h.isut, &h.isstd, &h.leap, &h.time, &h.type, &h.chars};
  for (uint32_t* c : counts) *c = static_cast<uint32_t>(r.Int(4));
  if (h.type == 0 || h.type > kMaxTypes) {
    return ErrorAt(at,
                   "typecnt " + std::to_string(h.type) + " not in 1.." + std::to_string(kMaxTypes));
  }
  if (h.time > kMaxTransitions) {
    return ErrorAt(
        at, "timecnt " + std::to_string(h.time) + " above " + std::to_string(kMaxTransitions));
  }
  if (h.chars == 0 || h.chars > 4096) return ErrorAt(at, "charcnt not in 1..4096");
  if ((h.isut != 0 && h.isut != h.type) || (h.isstd != 0 && h.isstd != h.type)) {
    return ErrorAt(at, "isutcnt/isstdcnt must be 0 or typecnt");
  }
  if (h.leap != 0) return ErrorAt(at, "leap-second zones (right/...) are not supported");
  return h;
}

// Length in bytes of a data block whose times are `tb` bytes wide.
uint64_t BlockBytes(const Header& h, int tb) {
  return uint64_t{h.time} * (tb + 1) + uint64_t{h.type} * 6 + h.chars +
         uint64_t{h.leap} * (tb + 4) + h.isstd + h.isut;
}

// Footer text parser: the POSIX TZ grammar with RFC 8536's extensions
// (hours of a rule's time up to 167, negative times).
class RuleParser {
 public:
  explicit RuleParser(std::string_view t) : t_(t) {}

  Result<PosixTzRule> Parse() {
    PosixTzRule rule;
    if (auto s = Name(); !s.ok()) return s;
    int64_t off = 0;
    if (auto s = Offset(24, &off); !s.ok()) return s;
    rule.std_offset = -off;  // POSIX counts west of UTC
    if (i_ == t_.size()) return rule;
    rule.has_dst = true;
    if (auto s = Name(); !s.ok()) return s;
    rule.dst_offset = rule.std_offset + 3600;
    if (i_ < t_.size() && t_[i_] != ',') {
      if (auto s = Offset(24, &off); !s.ok()) return s;
      rule.dst_offset = -off;
    }
    if (i_ == t_.size()) return Fail("a DST zone needs its rule (,start,end)");
    if (auto s = Date(&rule.start); !s.ok()) return s;
    if (auto s = Date(&rule.end); !s.ok()) return s;
    if (i_ != t_.size()) return Fail("unexpected text after the rule");
    return rule;
  }

 private:
  Status Fail(const std::string& why) const {
    return InvalidArgument("footer at byte " + std::to_string(i_) + ": " + why);
  }
  bool Digit() const { return i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9'; }

  Status Name() {
    size_t n = 0;
    if (i_ < t_.size() && t_[i_] == '<') {
      ++i_;
      while (i_ < t_.size() && t_[i_] != '>') {
        const char c = t_[i_];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '-')) {
          return Fail("bad character in a <quoted> zone abbreviation");
        }
        ++i_, ++n;
      }
      if (i_ == t_.size()) return Fail("unterminated <quoted> zone abbreviation");
      ++i_;
    } else {
      while (i_ < t_.size() &&
             ((t_[i_] >= 'A' && t_[i_] <= 'Z') || (t_[i_] >= 'a' && t_[i_] <= 'z')))
        ++i_, ++n;
    }
    if (n < 3) return Fail("a zone abbreviation has at least 3 characters");
    return Status::Ok();
  }

  Status Number(int64_t max, int64_t* v) {
    if (!Digit()) return Fail("digit expected");
    *v = 0;
    int digits = 0;
    while (Digit()) {
      *v = *v * 10 + (t_[i_++] - '0');
      if (++digits > 3 || *v > max) return Fail("number above " + std::to_string(max));
    }
    return Status::Ok();
  }

  // [+-]hh[:mm[:ss]] in seconds, hours up to max_hours.
  Status Offset(int64_t max_hours, int64_t* out) {
    int64_t sign = 1;
    if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) sign = t_[i_++] == '-' ? -1 : 1;
    int64_t h = 0, m = 0, s = 0;
    if (auto st = Number(max_hours, &h); !st.ok()) return st;
    if (i_ < t_.size() && t_[i_] == ':') {
      ++i_;
      if (auto st = Number(59, &m); !st.ok()) return st;
      if (i_ < t_.size() && t_[i_] == ':') {
        ++i_;
        if (auto st = Number(59, &s); !st.ok()) return st;
      }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return Status::Ok();
  }

  Status Date(PosixTzRule::Date* d) {
    if (i_ >= t_.size() || t_[i_] != ',') return Fail("',' expected before a rule date");
    ++i_;
    int64_t v = 0;
    if (i_ < t_.size() && t_[i_] == 'J') {
      ++i_;
      d->kind = PosixTzRule::Date::kJulian1;
      if (auto s = Number(365, &v); !s.ok()) return s;
      if (v < 1) return Fail("Jn counts days 1..365");
      d->day = static_cast<int>(v);
    } else if (i_ < t_.size() && t_[i_] == 'M') {
      ++i_;
      d->kind = PosixTzRule::Date::kMonthWeekDay;
      int64_t m = 0, w = 0, wd = 0;
      if (auto s = Number(12, &m); !s.ok()) return s;
      if (m < 1) return Fail("month 1..12");
      if (i_ >= t_.size() || t_[i_++] != '.') return Fail("'.' expected in Mm.w.d");
      if (auto s = Number(5, &w); !s.ok()) return s;
      if (w < 1) return Fail("week 1..5");
      if (i_ >= t_.size() || t_[i_++] != '.') return Fail("'.' expected in Mm.w.d");
      if (auto s = Number(6, &wd); !s.ok()) return s;
      d->month = static_cast<int>(m), d->week = static_cast<int>(w), d->day = static_cast<int>(wd);
    } else {
      d->kind = PosixTzRule::Date::kJulian0;
      if (auto s = Number(365, &v); !s.ok()) return s;
      d->day = static_cast<int>(v);
    }
    d->time = 7200;
    if (i_ < t_.size() && t_[i_] == '/') {
      ++i_;
      if (auto s = Offset(167, &d->time); !s.ok()) return s;
    }
    return Status::Ok();
  }

  std::string_view t_;
  size_t i_ = 0;
};

// Local midnight (in days since the epoch) of a rule date in `year`.
int64_t RuleDay(const PosixTzRule::Date& d, int64_t year) {
  const int64_t jan1 = DaysFromCivil(year, 1, 1);
  switch (d.kind) {
    case PosixTzRule::Date::kJulian1:
      return jan1 + d.day - 1 + (IsLeap(year) && d.day >= 60 ? 1 : 0);
    case PosixTzRule::Date::kJulian0:
      return jan1 + d.day;
    case PosixTzRule::Date::kMonthWeekDay:
      break;
  }
  const int64_t first = DaysFromCivil(year, d.month, 1);
  const int64_t weekday = (first + 4) - 7 * FloorDiv(first + 4, 7);  // 1970-01-01: Thursday (4)
  int64_t day = first + (d.day - weekday + 7) % 7 + int64_t{d.week - 1} * 7;
  while (day >= first + DaysInMonth(year, d.month)) day -= 7;
  return day;
}

}  // namespace

int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = FloorDiv(y, 400);
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t z, int64_t* year, int* month, int* day) {
  z += 719468;
  const int64_t era = FloorDiv(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *year = yoe + era * 400 + (*month <= 2);
}

Result<PosixTzRule> PosixTzRule::Parse(std::string_view text) {
  if (text.size() > 128) return InvalidArgument("footer at byte 128: longer than 128 bytes");
  return RuleParser(text).Parse();
}

void PosixTzRule::TransitionsIn(int64_t year, std::vector<std::pair<int64_t, int64_t>>* out) const {
  if (!has_dst) return;
  // The start is given in standard time, the end in daylight time.
  const int64_t s = RuleDay(start, year) * kDay + start.time - std_offset;
  const int64_t e = RuleDay(end, year) * kDay + end.time - dst_offset;
  if (s <= e) {
    out->push_back({s, dst_offset});
    out->push_back({e, std_offset});
  } else {
    out->push_back({e, std_offset});
    out->push_back({s, dst_offset});
  }
}

int64_t PosixTzRule::OffsetAt(int64_t t) const {
  if (!has_dst) return std_offset;
  int64_t year;
  int month, day;
  CivilFromDays(FloorDiv(t + std_offset, kDay), &year, &month, &day);
  std::vector<std::pair<int64_t, int64_t>> changes;
  for (int64_t y = year - 1; y <= year + 1; ++y) TransitionsIn(y, &changes);
  int64_t offset = std_offset;
  // Each year's pair is ordered; years follow each other.
  for (const auto& [at, off] : changes) {
    if (at <= t) offset = off;
  }
  return offset;
}

Result<TimeZone> TimeZone::FromTzif(std::string_view name, std::string_view bytes) {
  if (bytes.size() > kMaxTzifBytes) {
    return InvalidArgument(std::string(name) + ": at byte " + std::to_string(kMaxTzifBytes) +
                           ": file larger than " + std::to_string(kMaxTzifBytes) + " bytes");
  }
  auto fail = [&](const Status& s) {
    return InvalidArgument(std::string(name) + ": " + s.message());
  };
  Reader r(bytes);
  auto v1 = ReadHeader(r);
  if (!v1.ok()) return fail(v1.status());
  if (v1->version < '2') return fail(ErrorAt(4, "version 1 files are not supported (no footer)"));
  const uint64_t skip = BlockBytes(*v1, 4);
  if (!r.Has(skip)) return fail(ErrorAt(r.pos(), "truncated version 1 data block"));
  r.Skip(skip);
  auto h = ReadHeader(r);
  if (!h.ok()) return fail(h.status());
  const size_t block_at = r.pos();
  if (!r.Has(BlockBytes(*h, 8))) return fail(ErrorAt(block_at, "truncated data block"));

  TimeZone z;
  z.name_ = std::string(name);
  std::vector<int64_t> times(h->time);
  std::vector<uint8_t> types(h->time);
  for (auto& t : times) t = r.Int(8);
  for (size_t i = 0; i < times.size(); ++i) {
    if (i > 0 && times[i] <= times[i - 1]) {
      return fail(ErrorAt(block_at + 8 * i, "transition times not increasing"));
    }
  }
  for (auto& t : types) {
    t = r.Byte();
    if (t >= h->type) return fail(ErrorAt(r.pos() - 1, "transition type out of range"));
  }
  std::vector<int64_t> type_offsets(h->type);
  for (auto& off : type_offsets) {
    const size_t at = r.pos();
    off = r.Int(4);
    r.Skip(1);  // isdst: the offset is all a quota needs
    const uint8_t desig = r.Byte();
    if (off < -kMaxUtcOffset || off > kMaxUtcOffset) {
      return fail(ErrorAt(at, "UTC offset " + std::to_string(off) + " s beyond 26 h"));
    }
    if (desig >= h->chars) return fail(ErrorAt(at + 5, "designation index out of range"));
  }
  r.Skip(h->chars + h->isstd + h->isut);
  z.times_ = std::move(times);
  z.offsets_.reserve(types.size());
  for (uint8_t t : types) z.offsets_.push_back(type_offsets[t]);
  z.initial_offset_ = type_offsets[0];

  // The footer: "\n<TZ string>\n".
  const size_t footer_at = r.pos();
  const std::string_view rest = r.Rest();
  if (rest.empty() || rest[0] != '\n')
    return fail(ErrorAt(footer_at, "footer must start with \\n"));
  const size_t nl = rest.find('\n', 1);
  if (nl == std::string_view::npos) return fail(ErrorAt(footer_at, "footer must end with \\n"));
  if (nl + 1 != rest.size()) return fail(ErrorAt(footer_at + nl + 1, "bytes after the footer"));
  const std::string_view tz = rest.substr(1, nl - 1);
  if (!tz.empty()) {
    auto rule = PosixTzRule::Parse(tz);
    if (!rule.ok()) return fail(ErrorAt(footer_at + 1, rule.status().message()));
    if (std::max(std::abs(rule->std_offset), std::abs(rule->dst_offset)) > kMaxUtcOffset) {
      return fail(ErrorAt(footer_at + 1, "footer offset beyond 26 h"));
    }
    z.rule_ = *rule;
    z.has_rule_ = true;
  }
  return z;
}

Result<TimeZone> TimeZone::Load(std::string_view name, const std::string& dir) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("time zone \"" + std::string(name.substr(0, kMaxZoneName)) +
                           "\": " + why);
  };
  if (name.empty() || name.size() > kMaxZoneName) {
    return bad("must be 1 to " + std::to_string(kMaxZoneName) + " characters");
  }
  size_t part = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '/') {
      if (i == part) return bad("empty path component");
      if (name[part] == '.') return bad("a component starts with '.'");
      part = i + 1;
      continue;
    }
    const char c = name[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '+' || c == '.')) {
      return bad("character " + std::to_string(static_cast<unsigned char>(c)) + " at byte " +
                 std::to_string(i) + " is not used in zone names");
    }
  }
  const std::string path = dir + "/" + std::string(name);
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad("no such zone (" + path + " cannot be read; is tzdata installed?)");
  std::string bytes;
  bytes.resize(kMaxTzifBytes + 1);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  auto z = FromTzif(name, bytes);
  if (!z.ok()) return bad(z.status().message());
  return z;
}

TimeZone TimeZone::Fixed(std::string name, int64_t offset) {
  TimeZone z;
  z.name_ = std::move(name);
  z.initial_offset_ = offset;
  z.rule_.std_offset = offset;
  z.has_rule_ = true;
  return z;
}

int64_t TimeZone::OffsetAt(int64_t t) const {
  if (times_.empty() || t > times_.back()) {
    if (has_rule_) return rule_.OffsetAt(t);
    return times_.empty() ? initial_offset_ : offsets_.back();
  }
  const auto it = std::upper_bound(times_.begin(), times_.end(), t);
  if (it == times_.begin()) return initial_offset_;
  return offsets_[static_cast<size_t>(it - times_.begin()) - 1];
}

bool TimeZone::ConstantAround(int64_t t, int64_t* offset, int64_t* from, int64_t* to) const {
  constexpr int64_t kFar = int64_t{1} << 60;
  if (times_.empty()) {
    if (has_rule_ && rule_.has_dst) return false;
    *offset = has_rule_ ? rule_.std_offset : initial_offset_;
    *from = -kFar;
    *to = kFar;
    return true;
  }
  if (t >= times_.back()) return false;
  const auto it = std::upper_bound(times_.begin(), times_.end(), t);  // != end: t < back
  const size_t next = static_cast<size_t>(it - times_.begin());
  *offset = next == 0 ? initial_offset_ : offsets_[next - 1];
  *from = next == 0 ? -kFar : times_[next - 1];
  *to = times_[next];
  return true;
}

void TimeZone::ChangesIn(int64_t from, int64_t to,
                         std::vector<std::pair<int64_t, int64_t>>* out) const {
  auto it = std::upper_bound(times_.begin(), times_.end(), from);
  for (; it != times_.end() && *it <= to; ++it) {
    out->push_back({*it, offsets_[static_cast<size_t>(it - times_.begin())]});
  }
  if (!has_rule_) return;
  // After the last transition the footer rule decides (OffsetAt): where the file's last offset
  // and the rule's differ (a file may say anything), that is a change of its own, one second
  // after the last transition, though neither list names it.
  if (!times_.empty() && times_.back() >= from && times_.back() < to) {
    const int64_t first_rule_second = times_.back() + 1;
    const int64_t rule_offset = rule_.OffsetAt(first_rule_second);
    if (rule_offset != offsets_.back()) out->push_back({first_rule_second, rule_offset});
  }
  if (!rule_.has_dst) return;
  const int64_t after = times_.empty() ? from : std::max(from, times_.back());
  if (after >= to) return;
  int64_t y0, y1;
  int m, d;
  CivilFromDays(FloorDiv(after, kDay), &y0, &m, &d);
  CivilFromDays(FloorDiv(to, kDay), &y1, &m, &d);
  std::vector<std::pair<int64_t, int64_t>> rule;
  for (int64_t y = y0 - 1; y <= y1 + 1; ++y) rule_.TransitionsIn(y, &rule);
  for (const auto& c : rule) {
    if (c.first > after && c.first <= to) out->push_back(c);
  }
}

int64_t TimeZone::FirstInstantAtOrAfter(int64_t local) const {
  // Offsets stay within 26 h, so the answer lies within a day and a bit of
  // `local` read as UTC, or at a change of offset in that span (a gap).
  const int64_t from = local - 2 * kDay, to = local + 2 * kDay;
  std::vector<std::pair<int64_t, int64_t>> changes;
  ChangesIn(from, to, &changes);
  // Segments [start, next) of constant offset, in time order: the first that
  // holds an instant t with t + offset >= local holds the earliest one.
  int64_t start = from, offset = OffsetAt(from);
  for (size_t i = 0;; ++i) {
    const int64_t candidate = std::max(start, local - offset);
    if (i == changes.size() || candidate < changes[i].first) return candidate;
    start = changes[i].first;
    offset = changes[i].second;
  }
}

}  // namespace tollgate
