// Fuzz target: the shared HTTP text helpers (tollgate/http_text.h,
// src/base/http_text.cc) that every front end runs on client bytes:
// SplitTarget, QueryTokenizer, ForEachQueryParam, TrimOws and the ASCII
// case-insensitive compare, and RequestView::QueryParam built on them.
//
// Input: a request target (as a client sends it), then optionally a NUL and a
// second text (a header value, a needle for the compares).
// Properties:
//   - SplitTarget: the path holds no '?', and path + '?' + query is the
//     target (the '?' only when the target has one);
//   - QueryTokenizer: every parameter is a view into the query, in order,
//     never overlapping; a name holds no '&' or '=', a value no '&'; no more
//     parameters than '&'-separated parts; the non-empty parts, joined again,
//     are exactly the parameters (name, '=' when the part had one, value);
//   - ForEachQueryParam calls back once per tokenised parameter, its decoded
//     name and value no longer than the raw ones; RequestView::QueryParam of a
//     decoded name is the decoded value of its first parameter;
//   - TrimOws returns a view into its input with no SP or HTAB at either end,
//     cut only SP and HTAB, and is idempotent;
//   - EqualsIgnoreCase, StartsWithIgnoreCase and ContainsIgnoreCase agree with
//     a reference that folds only A-Z, and AsciiLowered(s) equals s ignoring
//     case and holds no A-Z.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.h"
#include "tollgate/http_text.h"
#include "tollgate/request.h"

namespace {

using tollgate::fuzz::Quote;

char RefLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

bool RefEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return RefLower(x) == RefLower(y);
         });
}

bool RefContains(std::string_view s, std::string_view needle) {
  return std::search(s.begin(), s.end(), needle.begin(), needle.end(),
                     [](char x, char y) { return RefLower(x) == RefLower(y); }) != s.end() ||
         needle.empty();
}

bool Within(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

bool Ows(char c) { return c == ' ' || c == '\t'; }

void CheckSplit(std::string_view target) {
  const tollgate::RequestTarget t = tollgate::SplitTarget(target);
  FUZZ_CHECK(t.path.find('?') == std::string_view::npos, "a '?' in the path: " + Quote(t.path));
  const bool has_query = target.find('?') != std::string_view::npos;
  const std::string joined = std::string(t.path) + (has_query ? "?" : "") + std::string(t.query);
  FUZZ_CHECK(joined == target, "split does not rejoin: " + Quote(target) + " -> " + Quote(joined));
}

void CheckQuery(std::string_view query) {
  struct Param {
    std::string_view name;
    std::string_view value;
  };
  std::vector<Param> params;
  tollgate::QueryTokenizer tokens(query);
  std::string_view name;
  std::string_view value;
  const char* last_end = query.data();
  while (tokens.Next(&name, &value)) {
    FUZZ_CHECK(Within(name, query) && Within(value, query), "a view outside the query");
    FUZZ_CHECK(name.data() >= last_end, "parameters out of order or overlapping");
    FUZZ_CHECK(name.find_first_of("&=") == std::string_view::npos, "name " + Quote(name));
    FUZZ_CHECK(value.find('&') == std::string_view::npos, "value " + Quote(value));
    last_end = value.data() + value.size();
    params.push_back({name, value});
  }
  FUZZ_CHECK(!tokens.Next(&name, &value), "a tokenizer that came back after its end");
  const size_t parts = static_cast<size_t>(std::count(query.begin(), query.end(), '&')) + 1;
  FUZZ_CHECK(params.size() <= parts, "more parameters than parts");
  // The non-empty parts, rebuilt from the parameters (a value that is not
  // empty, or a part that had an '=', needs the '=' back).
  std::string rebuilt;
  std::string expected;
  for (std::string_view rest = query; !rest.empty();) {
    const size_t amp = rest.find('&');
    const std::string_view part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (part.empty()) continue;
    if (!expected.empty()) expected.push_back('&');
    expected.append(part);
  }
  for (const Param& p : params) {
    if (!rebuilt.empty()) rebuilt.push_back('&');
    rebuilt.append(p.name);
    const bool had_equals = p.name.data() + p.name.size() < query.data() + query.size() &&
                            p.name.data()[p.name.size()] == '=';
    if (had_equals) rebuilt.push_back('=');
    rebuilt.append(p.value);
  }
  FUZZ_CHECK(rebuilt == expected,
             "parameters do not rebuild the query: " + Quote(query) + " -> " + Quote(rebuilt));

  std::vector<std::pair<std::string, std::string>> decoded;
  tollgate::ForEachQueryParam(
      query, [&](std::string_view n, std::string_view v) { decoded.emplace_back(n, v); });
  FUZZ_CHECK(decoded.size() == params.size(), "ForEachQueryParam and the tokenizer disagree");
  tollgate::RequestView view;
  view.query = query;
  for (size_t i = 0; i < decoded.size(); ++i) {
    FUZZ_CHECK(decoded[i].first.size() <= params[i].name.size(), "a name grew in decoding");
    FUZZ_CHECK(decoded[i].second.size() <= params[i].value.size(), "a value grew in decoding");
    const bool first =
        std::none_of(decoded.begin(), decoded.begin() + static_cast<std::ptrdiff_t>(i),
                     [&](const auto& d) { return d.first == decoded[i].first; });
    if (!first) continue;
    const auto got = view.QueryParam(decoded[i].first);
    FUZZ_CHECK(got.has_value() && *got == decoded[i].second,
               "QueryParam(" + Quote(decoded[i].first) + ") is not its first value");
  }
}

void CheckTrim(std::string_view s) {
  const std::string_view t = tollgate::TrimOws(s);
  FUZZ_CHECK(Within(t, s) || t.empty(), "trimmed view outside its input");
  FUZZ_CHECK(t.empty() || (!Ows(t.front()) && !Ows(t.back())), "OWS left: " + Quote(t));
  FUZZ_CHECK(tollgate::TrimOws(t) == t, "trim not idempotent: " + Quote(s));
  if (!t.empty()) {
    const size_t head = static_cast<size_t>(t.data() - s.data());
    const std::string_view cut_front = s.substr(0, head);
    const std::string_view cut_back = s.substr(head + t.size());
    FUZZ_CHECK(std::all_of(cut_front.begin(), cut_front.end(), Ows) &&
                   std::all_of(cut_back.begin(), cut_back.end(), Ows),
               "trim cut more than OWS: " + Quote(s));
  } else {
    FUZZ_CHECK(std::all_of(s.begin(), s.end(), Ows), "trim emptied a text with content");
  }
}

void CheckCompare(std::string_view a, std::string_view b) {
  FUZZ_CHECK(tollgate::EqualsIgnoreCase(a, b) == RefEquals(a, b),
             "EqualsIgnoreCase(" + Quote(a) + ", " + Quote(b) + ")");
  FUZZ_CHECK(tollgate::EqualsIgnoreCase(a, b) == tollgate::EqualsIgnoreCase(b, a), "not symmetric");
  FUZZ_CHECK(tollgate::StartsWithIgnoreCase(a, b) ==
                 (a.size() >= b.size() && RefEquals(a.substr(0, b.size()), b)),
             "StartsWithIgnoreCase(" + Quote(a) + ", " + Quote(b) + ")");
  FUZZ_CHECK(tollgate::ContainsIgnoreCase(a, b) == RefContains(a, b),
             "ContainsIgnoreCase(" + Quote(a) + ", " + Quote(b) + ")");
  const std::string lower = tollgate::AsciiLowered(a);
  FUZZ_CHECK(tollgate::EqualsIgnoreCase(lower, a), "AsciiLowered changed more than case");
  FUZZ_CHECK(std::none_of(lower.begin(), lower.end(), [](char c) { return c >= 'A' && c <= 'Z'; }),
             "AsciiLowered left an upper-case letter: " + Quote(lower));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view target = input.substr(0, nul);
  const std::string_view other =
      nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);

  CheckSplit(target);
  CheckQuery(tollgate::SplitTarget(target).query);
  CheckTrim(target);
  CheckTrim(other);
  CheckCompare(target, other);
  CheckCompare(other, target);
  return 0;
}
