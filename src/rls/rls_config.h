// RlsConfig: the Envoy rate limit service configuration, as envoyproxy/ratelimit
// writes it (domains -> nested descriptor trees with rate_limit blocks), plus
// tollgate's extensions (an algorithm and a burst per rate_limit).
//
//   RlsDomainSpec...  (plain data, from YAML via rls_yaml.h or built in code)
//     -> CompileRlsConfig() validates everything (errors carry paths such as
//        "descriptors[0].rate_limit.unit") and builds an immutable RlsConfig
//     -> RlsConfig::Match(domain, entries) finds the rule of one request
//        descriptor exactly as envoyproxy/ratelimit does (docs/envoy.md).
//
// Units: unit + requests_per_unit become a core Limit (docs/envoy.md, "Units"):
//   token_bucket (the default) / leaky_bucket: requests_per_unit per unit as
//     an exact count per period, burst = rate_limit.burst, or
//     requests_per_unit when unset;
//   fixed_window (envoyproxy/ratelimit's semantics): requests_per_unit per
//     window of one unit;
//   sliding_window / sliding_log: requests_per_unit per sliding unit window.
//
// Thread safety: an RlsConfig is immutable after CompileRlsConfig(); share it
// through std::shared_ptr<const RlsConfig> between any number of threads.
// Errors: CompileRlsConfig() returns every problem, never just the first.
#ifndef TOLLGATE_SRC_RLS_RLS_CONFIG_H_
#define TOLLGATE_SRC_RLS_RLS_CONFIG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tollgate/envoy_rls.h"
#include "tollgate/limit.h"
#include "tollgate/policy.h"

namespace google::protobuf {
class Struct;
}  // namespace google::protobuf

namespace tollgate::rls {

class RlsCounters;
struct RuleHits;

// The numbers match envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit.
enum class RlsUnit : int { kUnknown = 0, kSecond, kMinute, kHour, kDay, kMonth, kYear, kWeek };

// Seconds in one unit as envoyproxy/ratelimit counts them (month = 30 days,
// year = 365 days); 0 for kUnknown.
int64_t UnitSeconds(RlsUnit unit);
std::string_view UnitName(RlsUnit unit);  // "second", ...
// Case-insensitive "second".."year", "week"; false for anything else.
bool ParseUnit(std::string_view name, RlsUnit* out);

struct RlsRateLimitSpec {
  RlsUnit unit = RlsUnit::kUnknown;
  uint32_t requests_per_unit = 0;  // 0 = every request with a cost is over the limit
  std::string name;
  bool unlimited = false;
  std::vector<std::string> replaces;  // names of rate limits this one replaces
  // tollgate extensions (envoyproxy/ratelimit rejects these keys).
  std::optional<Algorithm> algorithm;  // unset: the loader's default
  int64_t burst = 0;                   // token/leaky bucket capacity; 0 = requests_per_unit
};

struct RlsDescriptorSpec {
  std::string key;
  // Empty: any value, each its own counter. With `*`: a wildcard (rls_wildcard.h),
  // "/api/*/action" matches "/api/v1/action"; each matching value its own
  // counter unless share_threshold.
  std::string value;
  std::optional<RlsRateLimitSpec> rate_limit;
  bool shadow_mode = false;
  // envoyproxy/ratelimit's quota mode (docs/envoy.md): over its limit the
  // descriptor's status is OVER_LIMIT, and the call is over only when every
  // quota-mode descriptor of it is.
  bool quota_mode = false;
  // tollgate extension (docs/envoy.md, "Costs known at stream end"): a
  // descriptor cost > 0 is charged without a fit check and never rejects
  // (Envoy's apply_on_stream_done call); cost 0 checks the bucket, over when
  // it has no whole token left.
  bool charge_only = false;
  // On a wildcard value: every matching value counts against one shared
  // counter (the pattern's) instead of one counter each.
  bool share_threshold = false;
  bool detailed_metric = false;  // accepted for compatibility; counters stay per rule
  bool value_to_metric = false;  // accepted for compatibility; counters stay per rule
  // `metadata`: a mapping sent back in the response's dynamic_metadata while
  // the descriptor is within its limit; kept as JSON text (empty: none).
  std::string metadata_json;
  std::vector<RlsDescriptorSpec> descriptors;
};

struct RlsDomainSpec {
  std::string domain;
  std::vector<RlsDescriptorSpec> descriptors;
  std::string source;  // file name, prefixed to error paths when not empty
};

// RlsCompileOptions (how rule files compile) is public: tollgate/envoy_rls.h.

// One compiled rate_limit block.
struct RlsRule {
  std::string full_key;  // "domain.key_value.key2": the stats key envoyproxy/ratelimit uses
  std::string name;      // rate_limit.name, may be empty
  RlsUnit unit = RlsUnit::kUnknown;
  uint32_t requests_per_unit = 0;
  bool unlimited = false;
  bool shadow_mode = false;
  bool quota_mode = false;
  bool charge_only = false;  // RlsDescriptorSpec::charge_only
  std::vector<std::string> replaces;
  // The descriptor's `metadata`, or null.
  std::shared_ptr<const google::protobuf::Struct> metadata;
  // The limit the store applies; absent when unlimited or requests_per_unit == 0.
  std::optional<Limit> limit;
  // A short stable tag of the limit's shape ("fw60", "tb"), part of bucket keys
  // so a reload that changes the algorithm or window never reinterprets state.
  std::string shape;
  RuleHits* counters = nullptr;  // hit counters; never null after compilation
  size_t index = 0;              // 0 .. RlsConfig::rule_count() - 1, in compile order
};

// One request descriptor entry, borrowed.
struct RlsEntry {
  std::string_view key;
  std::string_view value;
};

// A rule and the entries its bucket key is made of: the request's, except that
// a value matched by a share_threshold wildcard is replaced by the pattern
// (views into the request and into the configuration).
struct RlsMatch {
  const RlsRule* rule = nullptr;
  std::vector<RlsEntry> key_entries;
  bool shared = false;  // some value was replaced by its pattern
};

class RlsConfig {
 public:
  struct Node;

  ~RlsConfig();
  RlsConfig(const RlsConfig&) = delete;
  RlsConfig& operator=(const RlsConfig&) = delete;

  bool HasDomain(std::string_view domain) const;
  // The rule for one request descriptor, or null (unknown domain, no match, or
  // a match whose node has no rate_limit). Matching is level by level: at each
  // level key+value beats a "prefix*" value beats key-only; the rule applies only
  // if the walk consumed every entry of the request descriptor. Wildcards are
  // tried in configuration order.
  const RlsRule* Match(std::string_view domain, const std::vector<RlsEntry>& entries) const;
  // Match() plus the entries of the bucket key (RlsMatch).
  RlsMatch MatchForKey(std::string_view domain, const std::vector<RlsEntry>& entries) const;

  size_t domain_count() const { return domains_.size(); }
  size_t rule_count() const { return rule_count_; }
  // Calls fn once for every rule (any order).
  void ForEachRule(const std::function<void(const RlsRule&)>& fn) const;
  RlsCounters& counters() const { return *counters_; }
  // The registry itself, to compile the next configuration with (reload).
  std::shared_ptr<RlsCounters> shared_counters() const { return counters_; }
  // "domain.key_value: 10/minute fixed_window ..." one line per rule, sorted.
  std::string Dump() const;

 private:
  friend struct RlsConfigBuilder;
  friend struct ParsedRlsConfig CompileRlsConfig(const std::vector<RlsDomainSpec>&,
                                                 const RlsCompileOptions&,
                                                 std::shared_ptr<RlsCounters>);
  RlsConfig();
  std::map<std::string, std::unique_ptr<Node>, std::less<>> domains_;
  size_t rule_count_ = 0;
  std::shared_ptr<RlsCounters> counters_;
};

struct ParsedRlsConfig {
  std::shared_ptr<const RlsConfig> config;  // null when errors is non-empty
  std::vector<ConfigError> errors;
};

// Validates and compiles `domains`. `counters` keeps per-rule counters across
// reloads (pass the previous config's registry); a fresh one when null.
ParsedRlsConfig CompileRlsConfig(const std::vector<RlsDomainSpec>& domains,
                                 const RlsCompileOptions& options = {},
                                 std::shared_ptr<RlsCounters> counters = nullptr);

// The LimitSpec for unit + requests_per_unit under `algorithm` (mapping above),
// exact: buckets get count = requests_per_unit per period = one unit, so
// 1/week refills in exactly 604800 s. `burst` 0 means requests_per_unit.
LimitSpec SpecForUnit(RlsUnit unit, uint32_t requests_per_unit, Algorithm algorithm, int64_t burst);
// Limit::Create(SpecForUnit(...)). Used for descriptor limit overrides too.
Result<Limit> LimitForUnit(RlsUnit unit, uint32_t requests_per_unit, Algorithm algorithm,
                           int64_t burst);
// The shape tag of a limit (see RlsRule::shape).
std::string LimitShape(const Limit& limit);

}  // namespace tollgate::rls

#endif  // TOLLGATE_SRC_RLS_RLS_CONFIG_H_
