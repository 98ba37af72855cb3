#include "policy/value_sets.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "policy/policy_impl.h"
#include "tollgate/period.h"

namespace tollgate {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Calls fn(line_number, trimmed_line) for every line that is not blank or a comment.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    if (!fn(line_no, line)) return;
  }
}

}  // namespace

bool CidrSet::Add(std::string_view text) {
  auto c = Cidr::Parse(text);
  if (!c) return false;
  if (!c->base.v6) {
    uint32_t a = 0;
    for (size_t i = 0; i < 4; ++i) a = (a << 8) | c->base.bytes[i];
    const uint32_t host = c->prefix == 0 ? 0xffffffffu : (uint32_t{1} << (32 - c->prefix)) - 1;
    v4_.push_back({a & ~host, (a & ~host) | host});
    return true;
  }
  V6 a;
  for (size_t i = 0; i < 8; ++i) a.hi = (a.hi << 8) | c->base.bytes[i];
  for (size_t i = 8; i < 16; ++i) a.lo = (a.lo << 8) | c->base.bytes[i];
  const int p = c->prefix;
  const uint64_t host_hi = p >= 64 ? 0 : (p == 0 ? ~uint64_t{0} : (uint64_t{1} << (64 - p)) - 1);
  const uint64_t host_lo = p <= 64 ? ~uint64_t{0} : (p == 128 ? 0 : (uint64_t{1} << (128 - p)) - 1);
  V6 first{a.hi & ~host_hi, a.lo & ~host_lo};
  V6 last{first.hi | host_hi, first.lo | host_lo};
  v6_.push_back({first, last});
  return true;
}

void CidrSet::Finish() {
  std::sort(v4_.begin(), v4_.end());
  std::vector<std::pair<uint32_t, uint32_t>> v4;
  for (const auto& r : v4_) {
    // Merge overlapping or adjacent ranges (adjacent: last + 1 == first, no overflow).
    if (!v4.empty() && (r.first <= v4.back().second ||
                        (v4.back().second != 0xffffffffu && r.first == v4.back().second + 1))) {
      v4.back().second = std::max(v4.back().second, r.second);
    } else {
      v4.push_back(r);
    }
  }
  v4_ = std::move(v4);
  std::sort(v6_.begin(), v6_.end());
  std::vector<std::pair<V6, V6>> v6;
  for (const auto& r : v6_) {
    if (!v6.empty() && r.first <= v6.back().second) {
      if (v6.back().second < r.second) v6.back().second = r.second;
    } else {
      v6.push_back(r);
    }
  }
  v6_ = std::move(v6);
}

bool CidrSet::Contains(const IpAddress& ip) const {
  if (!ip.v6) {
    uint32_t a = 0;
    for (size_t i = 0; i < 4; ++i) a = (a << 8) | ip.bytes[i];
    // The last range starting at or before a.
    auto it = std::upper_bound(v4_.begin(), v4_.end(), std::make_pair(a, 0xffffffffu));
    return it != v4_.begin() && a <= std::prev(it)->second;
  }
  V6 a;
  for (size_t i = 0; i < 8; ++i) a.hi = (a.hi << 8) | ip.bytes[i];
  for (size_t i = 8; i < 16; ++i) a.lo = (a.lo << 8) | ip.bytes[i];
  auto it = std::upper_bound(v6_.begin(), v6_.end(), a,
                             [](const V6& x, const std::pair<V6, V6>& r) { return x < r.first; });
  return it != v6_.begin() && a <= std::prev(it)->second;
}

bool CidrSet::Contains(std::string_view ip_text) const {
  auto ip = IpAddress::Parse(ip_text);
  return ip && Contains(*ip);
}

std::vector<std::string> ParseValueLines(std::string_view text, std::vector<LineError>* errors,
                                         std::vector<size_t>* lines) {
  std::vector<std::string> out;
  ForEachLine(text, [&](size_t line_no, std::string_view line) {
    if (out.size() >= kMaxValueFileEntries) {
      errors->push_back({line_no, "more than " + std::to_string(kMaxValueFileEntries) + " values"});
      return false;
    }
    out.emplace_back(line);
    if (lines) lines->push_back(line_no);
    return true;
  });
  return out;
}

// ---------------------------------------------------------------------------
// TenantTable

namespace {

uint64_t SlotHash(std::string_view identity) {
  const uint64_t h = StableHash(identity, 0x74656e616e74ULL);
  return h == 0 ? 1 : h;
}

// A whole number in [1, max], strictly digits.
bool ParseWhole(std::string_view s, int64_t max, int64_t* out) {
  if (s.empty() || s.size() > 15) return false;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > max) return false;
  *out = v;
  return true;
}

// A positive finite decimal ("10", "0.5"), digits and one dot only.
bool ParseRate(std::string_view s, double* out) {
  if (s.empty() || s.size() > 32) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.')) return false;
  }
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || !(v > 0)) return false;
  *out = v;
  return true;
}

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> f;
  while (true) {
    const size_t c = line.find(',');
    f.push_back(Trim(line.substr(0, c)));
    if (c == std::string_view::npos) break;
    line = line.substr(c + 1);
  }
  return f;
}

// One tenant's numbers (count and period, or rps and burst; empty: not set)
// -> its limit under the rule's algorithm, or why not.
Result<Limit> RowLimit(std::string_view count_text, std::string_view period_text,
                       std::string_view rps_text, std::string_view burst_text,
                       Algorithm algorithm) {
  const bool has_count = !count_text.empty() || !period_text.empty();
  const bool has_rps = !rps_text.empty() || !burst_text.empty();
  if (has_count == has_rps) {
    return InvalidArgument("set count and period, or rps and burst (exactly one pair)");
  }
  LimitSpec spec;
  spec.algorithm = algorithm;
  if (has_count) {
    int64_t count = 0;
    if (!ParseWhole(count_text, Limit::kMaxBurst, &count)) {
      return InvalidArgument("count must be a whole number from 1 to 2^40");
    }
    auto period = ParsePeriod(period_text);
    if (!period.ok()) {
      return InvalidArgument("period: must be a period like \"1h\", \"30d\", \"1w\" or \"1h30m\"");
    }
    spec.burst = count;
    if (IsWindowAlgorithm(algorithm)) {
      spec.window = *period;
    } else {
      spec.count = count;
      spec.period = *period;
    }
  } else {
    if (IsWindowAlgorithm(algorithm)) {
      return InvalidArgument("rps,burst are not used by " + std::string(AlgorithmName(algorithm)) +
                             " (a window algorithm): use count,period");
    }
    double rate = 0;
    int64_t burst = 0;
    if (!ParseRate(rps_text, &rate)) {
      return InvalidArgument("rps must be a positive number");
    }
    if (!ParseWhole(burst_text, Limit::kMaxBurst, &burst)) {
      return InvalidArgument("burst must be a whole number from 1 to 2^40");
    }
    if (static_cast<double>(burst) < rate) {
      return InvalidArgument("burst must be >= rps");
    }
    spec.rate = rate;
    spec.burst = burst;
  }
  return Limit::Create(spec);
}

}  // namespace

uint32_t TenantTable::LimitIndex(const Limit& limit,
                                 std::unordered_map<std::string, uint32_t>& index) {
  auto [it, fresh] = index.emplace(limit.ToString(), static_cast<uint32_t>(limits_.size()));
  if (fresh) limits_.push_back(limit);
  return it->second;
}

void TenantTable::SizeFor(size_t rows) {
  size_t slots = 16;
  while (slots < rows * 2) slots <<= 1;
  slots_.assign(slots, Slot{});
}

std::shared_ptr<const TenantTable> TenantTable::Parse(std::string_view text, Algorithm algorithm,
                                                      std::vector<LineError>* errors,
                                                      size_t max_errors) {
  auto table = std::make_shared<TenantTable>();
  const size_t errors_before = errors->size();
  auto fail = [&](size_t line, std::string why) {
    if (errors->size() - errors_before < max_errors) errors->push_back({line, std::move(why)});
    return errors->size() - errors_before < max_errors;  // false: stop
  };
  // Column positions from the header line.
  int col_identity = -1, col_count = -1, col_period = -1, col_rps = -1, col_burst = -1;
  size_t columns = 0;
  bool header_seen = false;
  // Distinct limits by their canonical text.
  std::unordered_map<std::string, uint32_t> limit_index;
  // Rows counted first: sizes the slots once, no rehash.
  size_t rows = 0;
  ForEachLine(text, [&](size_t, std::string_view) {
    ++rows;
    return true;
  });
  if (rows > kMaxValueFileEntries + 1) {
    fail(0, "more than " + std::to_string(kMaxValueFileEntries) + " rows");
    return nullptr;
  }
  table->SizeFor(rows);
  table->arena_.reserve(text.size());

  ForEachLine(text, [&](size_t line_no, std::string_view line) {
    std::vector<std::string_view> f = SplitCsv(line);
    if (!header_seen) {
      header_seen = true;
      columns = f.size();
      for (size_t i = 0; i < f.size(); ++i) {
        const int at = static_cast<int>(i);
        int* slot = f[i] == "identity" ? &col_identity
                    : f[i] == "count"  ? &col_count
                    : f[i] == "period" ? &col_period
                    : f[i] == "rps"    ? &col_rps
                    : f[i] == "burst"  ? &col_burst
                                       : nullptr;
        if (!slot) {
          return fail(line_no, "header: unknown column " + std::to_string(i + 1) +
                                   " (expected identity, count, period, rps, burst)");
        }
        if (*slot >= 0) return fail(line_no, "header: column " + std::string(f[i]) + " twice");
        *slot = at;
      }
      if (col_identity < 0) return fail(line_no, "header: needs an identity column");
      if ((col_count >= 0) != (col_period >= 0) || (col_rps >= 0) != (col_burst >= 0) ||
          (col_count < 0 && col_rps < 0)) {
        return fail(line_no, "header: needs count,period or rps,burst columns (or both pairs)");
      }
      if (col_rps >= 0 && IsWindowAlgorithm(algorithm)) {
        return fail(line_no, "header: rps,burst are not used by " +
                                 std::string(AlgorithmName(algorithm)) +
                                 " (a window algorithm): use count,period");
      }
      return true;
    }
    if (f.size() != columns) {
      return fail(line_no, "expected " + std::to_string(columns) + " fields, got " +
                               std::to_string(f.size()));
    }
    auto at = [&](int col) { return col < 0 ? std::string_view() : f[static_cast<size_t>(col)]; };
    const std::string_view raw_identity = at(col_identity);
    if (raw_identity.empty()) return fail(line_no, "identity is empty");
    auto limit = RowLimit(at(col_count), at(col_period), at(col_rps), at(col_burst), algorithm);
    if (!limit.ok()) return fail(line_no, limit.status().message());
    const uint32_t limit_at = table->LimitIndex(*limit, limit_index);
    const std::string identity = NormalizeKeyValue(raw_identity);
    if (!table->Insert(identity, limit_at)) {
      return fail(line_no, "duplicate identity (an earlier line has it)");
    }
    return true;
  });
  if (!header_seen)
    fail(0, "empty: needs a header line (identity,count,period or identity,rps,burst)");
  if (errors->size() != errors_before) return nullptr;
  table->arena_.shrink_to_fit();
  return table;
}

std::shared_ptr<const TenantTable> TenantTable::FromEntries(
    std::span<const std::pair<std::string, std::string>> entries, Algorithm algorithm,
    std::vector<std::string>* errors, size_t max_errors) {
  const size_t errors_before = errors->size();
  auto fail = [&](std::string_view field, const std::string& why) {
    if (errors->size() - errors_before < max_errors) {
      errors->push_back("field \"" + std::string(field.substr(0, 64)) + "\": " + why);
    }
  };
  if (entries.size() > kMaxValueFileEntries) {
    errors->push_back("more than " + std::to_string(kMaxValueFileEntries) + " entries");
    return nullptr;
  }
  auto table = std::make_shared<TenantTable>();
  table->SizeFor(entries.size());
  std::unordered_map<std::string, uint32_t> limit_index;
  for (const auto& [field, value] : entries) {
    if (field.empty()) {
      fail(field, "identity is empty");
      continue;
    }
    // "count=1000,period=1h" or "rps=10,burst=20", in any order.
    std::string_view numbers[4];  // count, period, rps, burst
    std::string why;
    for (std::string_view part : SplitCsv(value)) {
      const size_t eq = part.find('=');
      const std::string_view name = Trim(part.substr(0, eq));
      const int at = name == "count"    ? 0
                     : name == "period" ? 1
                     : name == "rps"    ? 2
                     : name == "burst"  ? 3
                                        : -1;
      if (eq == std::string_view::npos || at < 0) {
        why = "expected count=N,period=P or rps=R,burst=B (got \"" +
              std::string(value.substr(0, 64)) + "\")";
        break;
      }
      if (!numbers[at].empty()) {
        why = std::string(name) + " twice";
        break;
      }
      numbers[at] = Trim(part.substr(eq + 1));
    }
    if (!why.empty()) {
      fail(field, why);
      continue;
    }
    auto limit = RowLimit(numbers[0], numbers[1], numbers[2], numbers[3], algorithm);
    if (!limit.ok()) {
      fail(field, limit.status().message());
      continue;
    }
    const uint32_t limit_at = table->LimitIndex(*limit, limit_index);
    if (!table->Insert(NormalizeKeyValue(field), limit_at)) {
      fail(field, "duplicate identity (after normalisation)");
    }
  }
  if (errors->size() != errors_before) return nullptr;
  table->arena_.shrink_to_fit();
  return table;
}

bool TenantTable::Insert(std::string_view identity, uint32_t limit) {
  const uint64_t h = SlotHash(identity);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.hash == 0) {
      s.hash = h;
      s.offset = static_cast<uint32_t>(arena_.size());
      s.limit = limit;
      const uint16_t len = static_cast<uint16_t>(identity.size());
      arena_.push_back(static_cast<char>(len & 0xff));
      arena_.push_back(static_cast<char>(len >> 8));
      arena_.append(identity);
      ++count_;
      return true;
    }
    if (s.hash == h && IdentityAt(s.offset) == identity) return false;
  }
}

std::string_view TenantTable::IdentityAt(uint32_t offset) const {
  const size_t len = static_cast<uint8_t>(arena_[offset]) |
                     (static_cast<size_t>(static_cast<uint8_t>(arena_[offset + 1])) << 8);
  return std::string_view(arena_).substr(offset + 2, len);
}

const Limit* TenantTable::Find(std::string_view identity) const {
  if (count_ == 0) return nullptr;
  const uint64_t h = SlotHash(identity);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return nullptr;
    if (s.hash == h && IdentityAt(s.offset) == identity) return &limits_[s.limit];
  }
}

size_t TenantTable::MemoryBytes() const {
  return sizeof(*this) + slots_.capacity() * sizeof(Slot) + arena_.capacity() +
         limits_.capacity() * sizeof(Limit);
}

}  // namespace tollgate
