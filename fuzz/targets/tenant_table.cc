// Fuzz target: the tenant limits table (src/policy/value_sets.cc
// TenantTable::Parse), the CSV file a rule's "tenants" names, the value file
// reader (ParseValueLines) with the CIDR set built from its lines, and the
// rows of a Redis tenant hash (TenantTable::FromEntries, issue 29).
//
// Input: the first byte picks the rule's algorithm (its value mod 5) and,
// with its top bit set, Redis rows instead of a file: the rest is then one
// entry a line, "field<TAB>value" (no tab: an empty value).
// Properties:
//   - a table xor errors; at most max_errors errors, each with a message and a
//     line number within the text (0: the file as a whole);
//   - a table holds at most one entry per data line, finds nothing for an
//     identity it never saw, and its memory is at least its slots and arena;
//   - every line a value file yields is non-empty and trimmed; a CIDR set
//     contains the base address of each range that parsed;
//   - Redis rows: a table xor errors, at most max_errors, each error naming
//     its field; a table holds one entry per row and finds each row's
//     identity (normalised as requests are) with a limit.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_input.h"
#include "policy/policy_impl.h"
#include "policy/value_sets.h"
#include "tollgate/ip_address.h"

namespace {

void RedisRows(std::string_view text, tollgate::Algorithm algorithm) {
  std::vector<std::pair<std::string, std::string>> entries;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t tab = line.find('\t');
    entries.emplace_back(std::string(line.substr(0, tab)),
                         tab == std::string_view::npos ? "" : std::string(line.substr(tab + 1)));
  }
  std::vector<std::string> errors;
  auto table = tollgate::TenantTable::FromEntries(entries, algorithm, &errors, 20);
  FUZZ_CHECK((table == nullptr) == !errors.empty(), "a table and errors, or neither");
  FUZZ_CHECK(errors.size() <= 20, "more errors than asked for");
  for (const std::string& e : errors) {
    FUZZ_CHECK(e.starts_with("field \"") || e.starts_with("more than "),
               "an error not naming its field: " + e);
  }
  if (!table) return;
  FUZZ_CHECK(table->size() == entries.size(), "a row lost or added");
  for (const auto& [field, value] : entries) {
    FUZZ_CHECK(table->Find(tollgate::NormalizeKeyValue(field)) != nullptr,
               "a row's identity not found: " + field);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tollgate::Algorithm;
  if (size == 0) return 0;
  const Algorithm algorithms[] = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                                  Algorithm::kFixedWindow, Algorithm::kSlidingWindow,
                                  Algorithm::kSlidingLog};
  const Algorithm algorithm = algorithms[data[0] % 5];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 0x80) {
    RedisRows(text, algorithm);
    return 0;
  }
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;

  std::vector<tollgate::LineError> errors;
  auto table = tollgate::TenantTable::Parse(text, algorithm, &errors, 20);
  FUZZ_CHECK((table == nullptr) == !errors.empty(), "a table and errors, or neither");
  FUZZ_CHECK(errors.size() <= 20, "more errors than asked for");
  for (const auto& e : errors) {
    FUZZ_CHECK(!e.message.empty(), "an error without a message");
    FUZZ_CHECK(e.line <= lines,
               "error on line " + std::to_string(e.line) + " of " + std::to_string(lines));
  }
  if (table) {
    FUZZ_CHECK(table->size() < lines, "more entries than data lines");
    FUZZ_CHECK(table->Find("\\never-an-identity") == nullptr, "found an identity never written");
    FUZZ_CHECK(table->MemoryBytes() >= table->size() * 16, "memory below the slots");
  }

  std::vector<tollgate::LineError> value_errors;
  std::vector<size_t> line_numbers;
  const auto values = tollgate::ParseValueLines(text, &value_errors, &line_numbers);
  FUZZ_CHECK(values.size() == line_numbers.size(), "a value without its line");
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& v = values[i];
    FUZZ_CHECK(!v.empty() && v.front() != ' ' && v.back() != ' ', "an untrimmed value");
    FUZZ_CHECK(line_numbers[i] >= 1 && line_numbers[i] <= lines, "a value's line out of range");
  }
  std::vector<size_t> bad;
  auto cidrs =
      tollgate::CidrSet::Build(values, [&](size_t i, const std::string&) { bad.push_back(i); });
  for (size_t i = 0; i < values.size() && i < 64; ++i) {
    if (std::find(bad.begin(), bad.end(), i) != bad.end()) continue;
    auto c = tollgate::Cidr::Parse(values[i]);
    FUZZ_CHECK(c.has_value(), "a CIDR the set took but Cidr::Parse refuses");
    FUZZ_CHECK(cidrs->Contains(c->base), "the set misses its own range's base: " + values[i]);
  }
  return 0;
}
