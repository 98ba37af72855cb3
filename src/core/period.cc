#include "tollgate/period.h"

#include <array>

namespace tollgate {
namespace {

struct Unit {
  std::string_view name;
  int64_t ns;
};

// A unit is matched by its whole name (the letters up to the next digit).
constexpr std::array<Unit, 8> kUnits = {{{"ns", 1},
                                         {"us", 1'000},
                                         {"ms", 1'000'000},
                                         {"s", 1'000'000'000},
                                         {"m", 60'000'000'000},
                                         {"h", 3'600'000'000'000},
                                         {"d", 86'400'000'000'000},
                                         {"w", 604'800'000'000'000}}};

constexpr int kMaxDigits = 18;  // 10^18 - 1 fits in int64

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 16)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : '?');
  }
  return out;
}

Status Bad(size_t at, const std::string& why) {
  return InvalidArgument("at byte " + std::to_string(at) + ": " + why +
                         " (a period is like \"1h\", \"30d\", \"1w\", \"13s\" or \"1h30m\"; "
                         "units ns, us, ms, s, m, h, d, w)");
}

}  // namespace

Result<Nanos> ParsePeriod(std::string_view text) {
  if (text.empty()) return Bad(0, "empty");
  if (text.size() > kMaxPeriodText) {
    return Bad(kMaxPeriodText, "longer than " + std::to_string(kMaxPeriodText) + " bytes");
  }
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (i - start == kMaxDigits) return Bad(start, "more than 18 digits");
      n = n * 10 + (text[i] - '0');
      ++i;
    }
    if (i == start) {
      if (text[i] == '.' || text[i] == '-' || text[i] == '+') {
        return Bad(i, "only whole, unsigned numbers (\"1500ms\", not \"1.5s\")");
      }
      return Bad(i, "expected a number, got \"" + Printable(text.substr(i)) + "\"");
    }
    if (i == text.size()) return Bad(i, "the number " + std::to_string(n) + " has no unit");
    if (text[i] == '.' || text[i] == ',') {
      return Bad(i, "only whole numbers (\"1500ms\", not \"1.5s\")");
    }
    // The unit is every letter up to the next digit.
    size_t end = i;
    while (end < text.size() && !(text[end] >= '0' && text[end] <= '9')) ++end;
    const std::string_view name = text.substr(i, end - i);
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (name == u.name) unit = &u;
    }
    if (unit == nullptr) {
      const bool calendar = name.starts_with("mo") || name.starts_with("y");
      return Bad(i, "unknown unit \"" + Printable(name) + "\"" +
                        (calendar ? "; months and years vary in length, align a quota to them "
                                    "instead"
                                  : ""));
    }
    i += unit->name.size();
    // Both factors are bounded (n < 10^18, unit <= 6.048e14), so the product
    // fits in 128 bits; compare before adding.
    const __int128 term = static_cast<__int128>(n) * unit->ns;
    if (term + total > kMaxPeriod.count()) return Bad(start, "longer than 366 days");
    total += static_cast<int64_t>(term);
  }
  if (total <= 0) return Bad(0, "must be longer than zero");
  return Nanos(total);
}

std::string FormatPeriod(Nanos period) {
  int64_t left = period.count();
  if (left <= 0) return "0s";
  std::string out;
  // Weeks only for whole weeks, so "8d" stays "8d".
  for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
    if (it->name == "w" && left % it->ns != 0) continue;
    if (left >= it->ns) {
      out += std::to_string(left / it->ns) + std::string(it->name);
      left %= it->ns;
    }
  }
  return out;
}

}  // namespace tollgate
