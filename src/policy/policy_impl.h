// The compiled, immutable policy: rules with parsed key sources, match
// conditions (compiled RE2), cost sources and a validated Limit.
//
// Thread safety: immutable after ParsePolicy builds it; shared by pointer.
#ifndef TOLLGATE_SRC_POLICY_POLICY_IMPL_H_
#define TOLLGATE_SRC_POLICY_POLICY_IMPL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include "tollgate/lease.h"

#include "base/config_errors.h"
#include "base/names.h"
#include "tollgate/limit.h"
#include "tollgate/policy.h"
#include "tollgate/policy_headers.h"

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
inline constexpr size_t kMaxRuleNameLength = base::kMaxNameLength;
inline constexpr size_t kMaxRegexLength = 512;
inline constexpr size_t kMaxMatchValues = 256;
inline constexpr size_t kMaxKeyValueLength = 256;  // longer values are replaced by a hash
inline constexpr int64_t kMaxCost = Limit::kMaxBurst + 1;
// Match trees (any / all / not): nesting and total size per rule.
inline constexpr int kMaxMatchDepth = 8;
inline constexpr size_t kMaxMatchNodes = 128;
// Values and CIDR ranges loaded from one file (value sets): entries and bytes.
inline constexpr size_t kMaxValueFileEntries = 1'000'000;
inline constexpr size_t kMaxValueFileBytes = 64 << 20;
// A CIDR list written inline in the policy.
inline constexpr size_t kMaxInlineCidrs = 1024;

struct JsonPointer;   // policy/request_fields.h
struct PathTemplate;  // policy/request_fields.h

// Where a value comes from: "ip:address", "header:x-api-key", "jwt:plan", ...
struct Source {
  // kCookie, kHost, kPathParam, kBody: policy/request_fields.h reads them.
  enum class Kind {
    kIp,
    kHeader,
    kQuery,
    kJwt,
    kPath,
    kMethod,
    kConst,
    kCookie,
    kHost,
    kPathParam,
    kBody
  };
  Kind kind = Kind::kConst;
  // header name (lower case), query name, claim path, const text, cookie name,
  // path parameter name, JSON pointer as written
  std::string arg;
  std::string spec;  // as written, for messages
  // kIp: "ip:address/<bits>" cuts IPv6 addresses to this prefix (1-128); 0: the whole address.
  int ip_prefix_bits = 0;
  std::shared_ptr<const JsonPointer> pointer;  // kBody
  // kPathParam: the rule's template (its match "path": {"template": ...}) and
  // the parameter's segment, set by LinkPathParams once the rule is parsed.
  std::shared_ptr<const PathTemplate> path_template;
  int path_param = -1;
};
// Parses a source spec; on failure sets *error to the reason.
bool ParseSource(std::string_view spec, Source* out, std::string* error);

class CidrSet;   // policy/value_sets.h
class ValueSet;  // policy/value_sets.h
class TenantTable;

struct Condition {
  enum class Op {
    kEquals,
    kOneOf,
    kPrefix,
    kSuffix,
    kRegex,
    kPresent,
    kAbsent,
    kInSet,     // one_of with values from a file (set)
    kCidr,      // the value is an IP address inside one of the ranges (cidrs)
    kAll,       // every child holds
    kAny,       // at least one child holds
    kNot,       // the one child does not hold
    kTemplate,  // the path fits a path template ("path": {"template": "/users/{id}"})
  };
  Source source;  // leaves only; kCidr on an ip source reads the client address
  Op op = Op::kEquals;
  std::vector<std::string> values;                    // equals (1), one_of, prefix, suffix
  std::shared_ptr<const re2::RE2> regex;              // kRegex; searched (unanchored unless ^ / $)
  std::shared_ptr<const ValueSet> set;                // kInSet
  std::shared_ptr<const CidrSet> cidrs;               // kCidr
  std::vector<Condition> children;                    // kAll, kAny, kNot
  std::shared_ptr<const PathTemplate> path_template;  // kTemplate
  std::string text;                                   // "jwt:plan equals enterprise", for explain
};

enum class MissingKey { kSkip, kShared };

// The rollback guard's triggers (seed 000), each off when 0; at least one is on.
// Evaluated per window of window_ns once it holds min_requests samples.
struct RollbackConfig {
  double max_reject_ratio = 0;  // rejected / decided > this
  int64_t max_p99_ns = 0;       // more than 1% of decisions took longer (p99 above it)
  // Upstream 5xx / answered minus the previous window's ratio > this (0.05 =
  // 5 points); the previous window counts only with min_requests answers,
  // else the baseline is 0.
  double max_upstream_error_increase = 0;
  // More than 1% of the window's upstream answers (gateway, middleware) took
  // longer than this (the upstream's p99 above it); 0: off.
  int64_t max_upstream_p99_ns = 0;
  int64_t window_ns = 60'000'000'000;
  int64_t min_requests = 100;
};

// What a rule does when it matches (docs/configuration.md, "Actions").
enum class RuleAction {
  kLimit,      // decide against the rule's limit (default)
  kAllow,      // exempt: allowed, no later rule is evaluated
  kDeny,       // refused with 403, no later rule is evaluated
  kUnlimited,  // applies (takes its tier group) with no limit; evaluation goes on
};
std::string_view RuleActionName(RuleAction action);
// The limit of rules without one (allow, deny, unlimited) and of storeless
// explicit items: a valid Limit that is never sent to a store.
const Limit& PlaceholderLimit();
// A set of HeaderStyles as bits (1 << style); kInheritStyles: not set (the
// Enforcer's styles apply).
inline constexpr uint8_t kInheritStyles = 0x80;
uint8_t HeaderStyleMask(std::span<const HeaderStyle> styles);
// Renders every report in the styles of its own mask (`masks[i]` for
// `reports[i]`; kInheritStyles: `defaults`). Each style is rendered once, from
// the reports that use it, in the order of `defaults` then the enum's; a header
// name another style already sent is skipped (x-ratelimit beside
// x-ratelimit-epoch from two rules: the first style's X-RateLimit-Reset wins).
std::vector<HeaderField> RenderRuleHeaders(std::span<const HeaderStyle> defaults,
                                           std::span<const QuotaReport> reports,
                                           std::span<const uint8_t> masks, int64_t wall_now_ns);
// The directory of a file path ("a/b.json" -> "a", "b.json" -> ".", "/b" -> "/"):
// where a policy file's relative value and tenant files are read.
std::string DirectoryOf(const std::string& path);
// The upstream outcomes that refund a rule's charge ("refund_on"): status
// classes ("5xx"), single statuses ("503"), "timeout", "connect_error",
// "upstream_error" (docs/configuration.md, "Refunds").
struct RefundOn {
  struct Entry {
    enum class Kind : uint8_t { kClass, kStatus, kTimeout, kConnectError, kBroken };
    Kind kind;
    int value = 0;      // the class digit (5 for "5xx") or the status
    std::string label;  // as written: the outcome label of tollgate_refunds_total
  };
  std::vector<Entry> entries;
  // The first entry `outcome` matches, or null.
  const Entry* Match(const ResponseOutcome& outcome) const;
};
inline constexpr size_t kMaxRefundOn = 16;
inline constexpr size_t kMaxResponseFieldLength = 64;
// max_response_cost by default: this many bursts.
inline constexpr int64_t kDefaultMaxResponseCostBursts = 100;

// Parses a rule's "refund_on" (an array of 1 to kMaxRefundOn strings), errors under `path`.
std::optional<RefundOn> ParseRefundOn(const nlohmann::json& j, const std::string& path,
                                      base::ConfigErrors& e);

struct Rule;
// A "template" operator's value (`v`, at `path`) on `source`: a kTemplate
// condition (policy/request_fields.cc's grammar), or nullopt with the error
// added. Only the "path" source takes a template.
std::optional<Condition> ParseTemplateCondition(const nlohmann::json& v, const Source& source,
                                                const std::string& path, base::ConfigErrors& e);
// Gives every path_param:<name> source of `rule` (limit_keys and match) the
// rule's template: the one "path": {"template": ...} condition at the top of
// its match. An error (at the source's path under `rule_path`) when there is
// none, more than one, or the template has no {name}.
void LinkPathParams(const std::string& rule_path, Rule* rule, base::ConfigErrors& e);
// Whether a body:<JSON pointer> source appears in `rule`'s limit_keys or match.
bool RuleReadsBody(const Rule& rule);

// A rule's "count_on" and "block_for" (src/policy/abuse.cc), read before its
// limit is known; errors under `path`. Refused for actions other than limit
// and for concurrency rules.
void ParseAbuseFields(const nlohmann::json& j, const std::string& path, bool limited,
                      bool concurrency, Rule* rule, base::ConfigErrors& e);
// The checks that need the rule's limit and cost (after SetRuleCost).
void CheckAbuseFields(const std::string& path, Rule* rule, base::ConfigErrors& e);
// " count_on=401,4xx block_for=15m" (the fields that are set; "" when none):
// the end of a rule's RuleSummary::description, so a policy diff shows them.
std::string AbuseDescription(const Rule& rule);
// The store key of `rule`'s penalty box for `identity`:
// "<rule>\x1fblock\x1f<identity>" ("block" is no algorithm name, so it never
// names a bucket).
std::string BlockKey(std::string_view rule, std::string_view identity);

// A rule's own answer to its refusals ("response"; src/policy/rule_answer.cc,
// docs/configuration.md, "Per-rule answers"): the status, extra header fields,
// the problem body's type / title / detail (templates of {rule}, {limit} and
// {retry_after} only, validated at load, never request data) and whether the
// rate-limit headers are sent. Empty texts keep the Enforcer's defaults.
struct RuleResponse {
  int status = 0;  // 0: the action's own (429 for a limit, 403 for a deny rule)
  std::vector<HeaderField> headers;
  std::string type;
  std::string title;
  std::string detail;
  bool ratelimit_headers = true;
};
inline constexpr size_t kMaxResponseHeaders = 16;
inline constexpr size_t kMaxResponseHeaderName = 64;
inline constexpr size_t kMaxResponseHeaderValue = 512;
inline constexpr size_t kMaxResponseText = 1024;
// A rule's "soft" and "response" (rule_answer.cc), read beside its other
// fields; errors under `path`. "soft" only on limit rules that are not
// concurrency rules; "response" only on limit and deny rules, never on a
// soft one (it never refuses).
void ParseAnswerFields(const nlohmann::json& j, const std::string& path, RuleAction action,
                       bool concurrency, Rule* rule, base::ConfigErrors& e);
// " soft response=403" (the fields that are set; "" when none): the end of a
// rule's RuleSummary::description, so a policy diff shows them.
std::string AnswerDescription(const Rule& rule);
// A response template with its placeholders filled: {rule}, {limit} and
// {retry_after}; the text was validated at load (every '{' opens one of them).
std::string FillAnswerTemplate(std::string_view text, std::string_view rule, int64_t limit,
                               int64_t retry_after_seconds);
// A refusal answered by `response` instead of the defaults: `out`'s status
// (when the response sets one), its problem body (the response's texts
// filled, else the defaults given; "status" the one sent) and the response's
// extra header fields. `out` was rendered with the defaults already;
// `limit` is what {limit} says (the rule's burst, 0 without a quota).
void ApplyRuleResponse(const RuleResponse& response, std::string_view rule,
                       std::string_view default_type, std::string_view default_title,
                       std::string_view default_detail, int64_t limit, CheckOutcome& out);

struct Rule {
  std::string name;
  RuleAction action = RuleAction::kLimit;
  std::string group;  // tier group: first matching rule of a group applies
  std::vector<Source> keys;
  std::vector<Condition> match;  // all must hold
  Limit limit;
  // Concurrency rules ("algorithm": "concurrency"): the lease limit the
  // Enforcer acquires; `limit` is then a fixed_window of max_in_flight per
  // lease time, only to describe the rule in headers and summaries.
  std::optional<LeaseLimit> lease;
  // kResponse: a response header or trailer (cost_arg), settled after the
  // response; kHandler: the middleware's handler reports it.
  enum class CostKind { kFixed, kHeader, kQuery, kResponse, kHandler };
  CostKind cost_kind = CostKind::kFixed;
  std::string cost_arg;  // header (lower case) or query name
  int64_t fixed_cost = 1;
  int64_t default_cost = 1;
  // kResponse / kHandler: charged up front (the request must fit it), and the
  // bound of a reported cost (larger values are clamped and counted invalid).
  int64_t cost_estimate = 1;
  int64_t max_response_cost = 0;
  // kResponse / kHandler: charged when the client left before the response
  // ended and the upstream did not finish (ResponseOutcome::client_aborted);
  // max_response_cost by default.
  int64_t abort_cost = 0;
  std::optional<RefundOn> refund_on;
  // Abuse protection (src/policy/abuse.cc; docs/configuration.md, "Counting
  // chosen outcomes" and "Penalty box"). count_on: the charge stays only when
  // the upstream outcome matches (charged at admission, refunded otherwise).
  std::optional<RefundOn> count_on;
  // block_for: once an enforced decision of this rule refuses a key, the key
  // is refused for this long (0: no penalty box). block_limit is the block
  // key's token bucket: 1 token per block_for, burst 1 (empty while blocked).
  Nanos block_for{0};
  std::optional<Limit> block_limit;
  bool SettlesAfterResponse() const {
    return cost_kind == CostKind::kResponse || cost_kind == CostKind::kHandler ||
           refund_on.has_value() || count_on.has_value();
  }
  bool shadow = false;
  // "soft": true: never refuses; over its limit the request is admitted and
  // told so (RuleOutcome::ShadowReason::kSoft; docs/configuration.md, "Soft limits").
  bool soft = false;
  // "response": how this rule's refusals are answered; null: the defaults.
  std::shared_ptr<const RuleResponse> response;
  double enforce_percent = 100;
  MissingKey missing_key = MissingKey::kSkip;
  std::string failure_mode;  // "open" | "closed" | "degrade"; empty: the store's default
  // failure_mode as the tag the Enforcer puts on the rule's store items.
  std::optional<FailureMode> failure_mode_tag;
  std::optional<RollbackConfig> rollback;
  // Per-identity limits (the rule's "tenants" file), or null.
  std::shared_ptr<const TenantTable> tenants;
  // The rule's own header styles ("headers"), a HeaderStyleMask; kInheritStyles:
  // the Enforcer's (server-wide) styles. 0: no rate-limit headers for this rule.
  uint8_t header_styles = kInheritStyles;
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
  // Whether a rule reads the request body (a body: source): set by ParsePolicy.
  bool reads_body = false;
};

// Parses "1.5", "20", "2e3" strictly: no sign, no hex, no inf/nan, <= 64 chars,
// finite and > 0; rounds fractions up; clamps huge values to kMaxCost.
// Returns false for anything else (the caller then uses default_cost).
bool ParseCost(std::string_view text, int64_t* out);

// Key value normalisation: trims spaces/tabs, escapes '\\', '|', a leading '~'
// and every byte outside 0x21-0x7e as \xHH, and replaces results longer than
// kMaxKeyValueLength by "~" + 32 hex digits of SHA-256.
std::string NormalizeKeyValue(std::string_view raw);
// One limit_keys value as it goes into an identity: NormalizeKeyValue, or
// kMissingValue (enforcer_impl.h) when its source was absent. The Enforcer's
// plan and KeyForRule both build identities from it.
std::string IdentityPart(const std::optional<std::string>& value);
// Joins normalised values with '|' (unambiguous thanks to the escaping).
std::string JoinIdentity(const std::vector<std::string>& normalized_values);

// The identity a request whose sources give `values` (in the rule's
// limit_keys order; nullopt: absent) gets for `rule`: IdentityPart of each,
// joined. `*missing` (optional) tells whether a source was absent (a tenant
// table is then not consulted). Refuses a count other than the rule's
// limit_keys and a value for a "const:" source other than its constant, with
// messages "values: ..." and "values[i]: ...".
Result<std::string> IdentityOfValues(const Rule& rule,
                                     std::span<const std::optional<std::string>> values,
                                     bool* missing = nullptr);

// A stable 64-bit hash (SplitMix-finalised FNV-1a) of `data` with `seed`.
uint64_t StableHash(std::string_view data, uint64_t seed);

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_POLICY_IMPL_H_
