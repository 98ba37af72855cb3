#include "tollgate/http_text.h"

#include "base/percent.h"

namespace tollgate {

std::string AsciiLowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

bool ContainsIgnoreCase(std::string_view s, std::string_view needle) {
  if (needle.empty()) return true;
  const char first = AsciiLower(needle.front());
  for (size_t i = 0; i + needle.size() <= s.size(); ++i) {
    if (AsciiLower(s[i]) == first && EqualsIgnoreCase(s.substr(i, needle.size()), needle)) {
      return true;
    }
  }
  return false;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

RequestTarget SplitTarget(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

bool QueryTokenizer::Next(std::string_view* raw_name, std::string_view* raw_value) {
  while (!rest_.empty()) {
    const size_t amp = rest_.find('&');
    const std::string_view part = rest_.substr(0, amp);
    rest_ = amp == std::string_view::npos ? std::string_view() : rest_.substr(amp + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    *raw_name = part.substr(0, eq);
    // Without '=': the empty view at the part's end, still a view into the query.
    *raw_value = eq == std::string_view::npos ? part.substr(part.size()) : part.substr(eq + 1);
    return true;
  }
  return false;
}

void ForEachQueryParam(std::string_view query,
                       const std::function<void(std::string_view, std::string_view)>& fn) {
  QueryTokenizer tokens(query);
  std::string_view name;
  std::string_view value;
  while (tokens.Next(&name, &value)) {
    const std::string decoded_name = base::PercentDecode(name);
    const std::string decoded_value = base::PercentDecode(value);
    fn(decoded_name, decoded_value);
  }
}

}  // namespace tollgate
