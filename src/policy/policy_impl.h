// The compiled, immutable policy: rules with parsed key sources, match
// conditions (compiled RE2), cost sources and a validated Limit.
//
// Thread safety: immutable after ParsePolicy builds it; shared by pointer.
#ifndef TOLLGATE_SRC_POLICY_POLICY_IMPL_H_
#define TOLLGATE_SRC_POLICY_POLICY_IMPL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/lease.h"
#include "tollgate/limit.h"
#include "tollgate/policy.h"

namespace re2 {
class RE2;
}

namespace tollgate {

// Bounds applied while parsing and while extracting values from requests.
inline constexpr size_t kMaxPolicyBytes = 4 << 20;
inline constexpr int kMaxJsonDepth = 32;
inline constexpr size_t kMaxRules = 1000;
inline constexpr size_t kMaxLimitKeys = 8;
inline constexpr size_t kMaxConditions = 16;
inline constexpr size_t kMaxRuleNameLength = 64;
inline constexpr size_t kMaxRegexLength = 512;
inline constexpr size_t kMaxMatchValues = 256;
inline constexpr size_t kMaxKeyValueLength = 256;  // longer values are replaced by a hash
inline constexpr int64_t kMaxCost = Limit::kMaxBurst + 1;

// Where a value comes from: "ip:address", "header:x-api-key", "jwt:plan", ...
struct Source {
  enum class Kind { kIp, kHeader, kQuery, kJwt, kPath, kMethod, kConst };
  Kind kind = Kind::kConst;
  std::string arg;   // header name (lower case), query name, claim path, const text
  std::string spec;  // as written, for messages
};
// Parses a source spec; on failure sets *error to the reason.
bool ParseSource(std::string_view spec, Source* out, std::string* error);

struct Condition {
  enum class Op { kEquals, kOneOf, kPrefix, kSuffix, kRegex, kPresent, kAbsent };
  Source source;
  Op op = Op::kEquals;
  std::vector<std::string> values;        // equals (1), one_of, prefix, suffix
  std::shared_ptr<const re2::RE2> regex;  // kRegex; searched (unanchored unless ^ / $)
  std::string text;                       // "jwt:plan equals enterprise", for explain
};

enum class MissingKey { kSkip, kShared };

struct RollbackConfig {
  double max_reject_ratio = 0.5;  // trips when rejected / decided > this
  int64_t window_ns = 60'000'000'000;
  int64_t min_requests = 100;
};

struct Rule {
  std::string name;
  std::string group;  // tier group: first matching rule of a group applies
  std::vector<Source> keys;
  std::vector<Condition> match;  // all must hold
  Limit limit;
  // Concurrency rules ("algorithm": "concurrency"): the lease limit the
  // Enforcer acquires; `limit` is then a fixed_window of max_in_flight per
  // lease time, only to describe the rule in headers and summaries.
  std::optional<LeaseLimit> lease;
  enum class CostKind { kFixed, kHeader, kQuery };
  CostKind cost_kind = CostKind::kFixed;
  std::string cost_arg;  // header (lower case) or query name
  int64_t fixed_cost = 1;
  int64_t default_cost = 1;
  bool shadow = false;
  double enforce_percent = 100;
  MissingKey missing_key = MissingKey::kSkip;
  std::string failure_mode;  // "open" | "closed" | "degrade"; empty: the store's default
  // failure_mode as the tag the Enforcer puts on the rule's store items.
  std::optional<FailureMode> failure_mode_tag;
  std::optional<RollbackConfig> rollback;
  std::string fingerprint;  // canonical text of the rule: changes when anything changes

  explicit Rule(Limit l) : limit(l) {}
};

class Policy {
 public:
  std::vector<Rule> rules;
  // For each rule, the index of its group (groups numbered in order of first appearance).
  std::vector<int> group_of;
  int group_count = 0;

  // Index of the rule named `name`, or -1.
  int Find(std::string_view name) const;
};

// Parses "1.5", "20", "2e3" strictly: no sign, no hex, no inf/nan, <= 64 chars,
// finite and > 0; rounds fractions up; clamps huge values to kMaxCost.
// Returns false for anything else (the caller then uses default_cost).
bool ParseCost(std::string_view text, int64_t* out);

// Key value normalisation: trims spaces/tabs, escapes '\\', '|', a leading '~'
// and every byte outside 0x21-0x7e as \xHH, and replaces results longer than
// kMaxKeyValueLength by "~" + 32 hex digits of SHA-256.
std::string NormalizeKeyValue(std::string_view raw);
// Joins normalised values with '|' (unambiguous thanks to the escaping).
std::string JoinIdentity(const std::vector<std::string>& normalized_values);

// A stable 64-bit hash (SplitMix-finalised FNV-1a) of `data` with `seed`.
uint64_t StableHash(std::string_view data, uint64_t seed);

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_POLICY_IMPL_H_
