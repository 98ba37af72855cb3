// Sets a policy loads once and reads on every request: CIDR ranges (CidrSet),
// strings (ValueSet), both possibly from a file, and the per-identity limits
// table (TenantTable, a rule's "tenants" file).
//
// File formats (docs/configuration.md, "Value files" and "Tenant tables"):
//   value file   one value (or CIDR) a line; blank lines and lines starting
//                with '#' are skipped; spaces around a value are trimmed.
//   tenant file  CSV with a header line naming the columns: identity plus
//                either count,period or rps,burst (or all four, a row setting
//                one pair); '#' comment lines and blank lines skipped.
// Every loader is bounded (kMaxValueFileBytes, kMaxValueFileEntries) and
// reports each bad line as "<file> line N: why", never quoting the line (the
// files are read by policy/value_file.h, confined to the policy's directory).
//
// Thread safety: immutable after building; shared by pointer between policies.
#ifndef TOLLGATE_SRC_POLICY_VALUE_SETS_H_
#define TOLLGATE_SRC_POLICY_VALUE_SETS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tollgate/ip_address.h"
#include "tollgate/limit.h"

namespace tollgate {

// IPv4 and IPv6 ranges merged into sorted, disjoint intervals: Contains() is a
// binary search, O(log n), whatever the number of CIDRs.
class CidrSet {
 public:
  // From CIDR texts ("10.0.0.0/8", "2001:db8::/32", a bare address). Each text
  // that does not parse is reported through `bad(index, why)`; the others are
  // kept. `why` never quotes the text (a file's lines may be secrets).
  template <typename Bad>
  static std::shared_ptr<const CidrSet> Build(const std::vector<std::string>& texts, Bad bad) {
    auto set = std::make_shared<CidrSet>();
    for (size_t i = 0; i < texts.size(); ++i) {
      if (!set->Add(texts[i])) bad(i, "not a CIDR or IP address");
    }
    set->Finish();
    return set;
  }
  bool Contains(const IpAddress& ip) const;
  bool Contains(std::string_view ip_text) const;
  size_t v4_ranges() const { return v4_.size(); }
  size_t v6_ranges() const { return v6_.size(); }

  // Building (Build() does both).
  bool Add(std::string_view cidr_text);
  void Finish();

 private:
  struct V6 {
    uint64_t hi = 0, lo = 0;
    bool operator<(const V6& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
    bool operator<=(const V6& o) const { return !(o < *this); }
  };
  std::vector<std::pair<uint32_t, uint32_t>> v4_;  // [first, last], sorted, disjoint
  std::vector<std::pair<V6, V6>> v6_;
};

// A set of exact strings (one_of from a file).
class ValueSet {
 public:
  explicit ValueSet(std::vector<std::string> values)
      : values_(std::make_move_iterator(values.begin()), std::make_move_iterator(values.end())) {}
  bool Contains(const std::string& v) const { return values_.count(v) != 0; }
  size_t size() const { return values_.size(); }

 private:
  std::unordered_set<std::string> values_;
};

// One problem in a file, by line (1-based; 0: the file as a whole).
struct LineError {
  size_t line = 0;
  std::string message;
};

// The values of a value file (see above); errors (too many lines, ...) appended.
// `lines`, when given, receives each value's line number.
std::vector<std::string> ParseValueLines(std::string_view text, std::vector<LineError>* errors,
                                         std::vector<size_t>* lines = nullptr);

// Per-identity limits: identity -> Limit, O(1) lookup. Identities are stored
// once in an arena, the distinct limits once in a table (a few plans shared by
// many tenants), and each entry is a 16-byte slot of an open-addressing hash
// table (load factor at most 1/2): about 2 * 16 + identity length + 4 bytes
// an entry (MemoryBytes() says exactly).
class TenantTable {
 public:
  // Parses the CSV text. `algorithm` and `max_delay` are the rule's: a row
  // only sets the numbers. Identities are normalised like request values
  // (NormalizeKeyValue). Duplicates are errors. Returns null when any error
  // was found (all reported, at most `max_errors`).
  static std::shared_ptr<const TenantTable> Parse(std::string_view text, Algorithm algorithm,
                                                  std::vector<LineError>* errors,
                                                  size_t max_errors = 100);
  // From (identity, limit text) entries, e.g. a Redis hash's fields and values:
  // "count=1000,period=1h" or "rps=10,burst=20" (the same numbers as a CSV
  // row). Each bad entry is reported as "field \"<identity>\": why" (at most
  // `max_errors`); returns null when any was found.
  static std::shared_ptr<const TenantTable> FromEntries(
      std::span<const std::pair<std::string, std::string>> entries, Algorithm algorithm,
      std::vector<std::string>* errors, size_t max_errors = 100);
  // The tenant's limit, or null when the identity is not in the table.
  const Limit* Find(std::string_view identity) const;
  size_t size() const { return count_; }
  size_t distinct_limits() const { return limits_.size(); }
  // Bytes held by the table (slots, arena, limits), for the benchmark.
  size_t MemoryBytes() const;

 private:
  struct Slot {
    uint64_t hash = 0;    // 0: empty (real hashes are forced non-zero)
    uint32_t offset = 0;  // into arena_: a 2-byte length, then the identity
    uint32_t limit = 0;   // index into limits_
  };
  bool Insert(std::string_view identity, uint32_t limit);  // false: duplicate
  void SizeFor(size_t rows);                               // slots for `rows` entries
  // The index of `limit` in limits_, added once (`index`: by canonical text).
  uint32_t LimitIndex(const Limit& limit, std::unordered_map<std::string, uint32_t>& index);
  std::string_view IdentityAt(uint32_t offset) const;

  std::vector<Slot> slots_;  // power of two
  std::string arena_;
  std::vector<Limit> limits_;
  size_t count_ = 0;
};

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_VALUE_SETS_H_
