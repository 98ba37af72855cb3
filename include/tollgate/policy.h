// Policy: turns a request into decisions, headers and a 429 body.
//
//   ParsePolicy(json)        -> an immutable, validated set of rules (or every error)
//   PolicyStore              -> the current Policy behind an atomic pointer; Reload()
//   Enforcer::Check(request) -> rules that apply -> (rule, key, cost) items ->
//                               Store::Acquire (all-or-nothing) -> CheckOutcome
//
// The configuration format is documented in docs/configuration.md; header and
// problem+json rendering live in tollgate/policy_headers.h.
//
// Thread safety: Policy is immutable; PolicyStore and Enforcer are safe to
// share between threads. A reload never disturbs an in-flight Check: it keeps
// the Policy it started with (a shared_ptr held by the CheckOutcome).
// Ownership: the Enforcer shares the PolicyStore, borrows the Store and the
// Clock (both must outlive it).
// Errors: parsing returns every validation error with its JSON path; Check()
// never throws. A store failure (non-ok Status) becomes verdict kUnavailable,
// HTTP 503 with the temporary-reduced-capacity problem type, never a 429; a
// store that answered under a fail-open mode (BatchDecision::enforced=false)
// becomes an allowed, unenforced outcome.
#ifndef TOLLGATE_POLICY_H_
#define TOLLGATE_POLICY_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/config_error.h"
#include "tollgate/decision.h"
#include "tollgate/lease.h"
#include "tollgate/limit.h"
#include "tollgate/request.h"
#include "tollgate/rule_counters.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

namespace tollgate {

class Policy;  // defined in src/policy/policy_impl.h; see PolicySummary for a public view

// Parses and validates a policy document: {"rules": [...]}, a bare array of
// rules, or a single rule object. Returns every error, never just the first;
// never crashes or hangs on any input (size and nesting are bounded).
// A valid policy also carries its text and version: "sha256:" and the first 16
// hex digits of the text's SHA-256, the same on every instance that runs the
// same bytes (what the admin API, /readyz and the metrics show for a fleet).
struct ParsedPolicy {
  std::shared_ptr<const Policy> policy;  // null when errors is non-empty
  std::vector<ConfigError> errors;
  std::string version;  // "" when errors is non-empty
  std::string text;     // the document as given; "" when errors is non-empty
};
// A tenant table kept in a Redis hash ("tenants": {"redis_hash": ...}): its
// key and how often the front end should read it again (0: only on reload).
struct TenantHashRef {
  std::string key;
  Nanos refresh{0};
};
// Reads every field and value of the hash `ref.key` into `entries` (the front
// end's Redis; tollgated: HSCAN, bounded). An error is reported at the rule's
// "tenants" path.
using TenantHashReader = std::function<Status(
    const TenantHashRef& ref, std::vector<std::pair<std::string, std::string>>* entries)>;

// Where the files a policy names (match value sets, tenant tables) are read.
struct PolicyParseOptions {
  // Relative file names are resolved against this directory; empty: the
  // current directory (ParsePolicyFile: the policy file's directory).
  std::string base_dir;
  // false: a policy naming a file is refused (fuzzing, untrusted text).
  bool files = true;
  // Loads Redis tenant tables; null: such a table is checked but left empty
  // (`tollgate check-config`, tests), every identity getting the rule's limit.
  TenantHashReader read_tenant_hash = nullptr;
};
ParsedPolicy ParsePolicy(std::string_view json_text, const PolicyParseOptions& options = {});
ParsedPolicy ParsePolicyFile(const std::string& path, PolicyParseOptions options = {});

// A read-only description of one rule (admin pages, explain, the Envoy adapter).
struct RuleSummary {
  std::string name;
  std::string group;  // rules of one group are tiers: the first that matches applies
  std::vector<std::string> limit_keys;
  Limit limit;
  // Set for a concurrency rule ("algorithm": "concurrency"); `limit` is then
  // max_in_flight per lease time as a fixed_window, for display only.
  std::optional<LeaseLimit> lease;
  bool shadow = false;  // mode: shadow
  double enforce_percent = 100;
  // When the remote store fails: "open", "closed" or "degrade" for this rule's
  // keys; empty = the store's own (global) mode.
  std::string failure_mode;
  std::string description;  // "token_bucket rate=10/s burst=20 keys=header:x-api-key"
};
std::vector<RuleSummary> SummarizePolicy(const Policy& policy);

// What changes between two policies, rule by rule (rules matched by name): the
// admin API's dry run and audit line, and `tollgate policy diff`. A limit is
// "raised" when, with the same algorithm, keys and mode, it admits no less in
// every respect (rate, burst, shaping delay) and more in one; "lowered" the
// reverse; any other difference (algorithm, keys, group, shadow, enforce
// percentage, failure mode, or a rate raised while the burst is lowered) is
// "changed". Order: the new policy's rules as listed, then removed ones.
struct RuleChange {
  enum class Kind : uint8_t { kAdded, kRemoved, kRaised, kLowered, kChanged };
  Kind kind = Kind::kChanged;
  std::string rule;
  std::string before;  // the rule as RuleSummary describes it; "" when added
  std::string after;   // "" when removed
};
std::string_view RuleChangeKindName(RuleChange::Kind kind);  // "added", "removed", ...
std::vector<RuleChange> DiffPolicies(const Policy& before, const Policy& after);
// One line a change ("raised  api: token_bucket rate=10/s ... -> ..."), or
// "no changes\n".
std::string FormatPolicyDiff(std::span<const RuleChange> changes);
// The changes as JSON text, as the admin API's dry run and the reload audit line show them:
// [{"after":"...","before":"...","change":"raised","rule":"api"}] ("[]" when none). Invalid
// UTF-8 in a rule's text is replaced (U+FFFD).
std::string PolicyDiffJson(std::span<const RuleChange> changes);

// Rules of a valid `policy` that can never apply, one warning each (path
// "rules[i]"): a rule after a rule of the same tier group without `match`
// (two rules on the same limit_keys are one group unless "group" says
// otherwise, and the first takes every request of the group), and every rule
// after an `allow` rule without `match`, or an enforced `deny` rule without
// `match` (evaluation stops there). Not errors: the policy loads and decides
// as written; `tollgate check-config` prints them and tollgated logs them
// (`policy_warning`) on every load and reload.
std::vector<ConfigError> PolicyWarnings(const Policy& policy);

// The name (lower case) of a header that a rule of `policy` keys on
// (limit_keys "header:<name>") and that `headers` hold more than once, or
// nullopt. A front end refuses such a request (tollgated's gateway: 400)
// instead of deciding on one copy while the upstream may read another
// (issue 14: rotating the first copy got a fresh bucket).
std::optional<std::string> RepeatedKeyHeader(const Policy& policy,
                                             std::span<const HeaderPair> headers);

// The current policy, swapped atomically on reload, together with what a
// front end compiled for it (an attachment: tollgated's Envoy configuration),
// so that one swap publishes both under one generation and no reader sees a
// new policy with an old attachment (or the reverse).
class PolicyStore {
 public:
  // Loads `path`; fails (kInvalidArgument, every error one a line) if it is invalid.
  // `clock` stamps each reload attempt (ReloadResult::wall_time_ns, its
  // WallNow()); it is borrowed and must outlive the store.
  // `options` are used for every later parse too (Reload, ReloadFromText);
  // Open's base_dir defaults to the policy file's directory, so relative
  // value and tenant files resolve the same on load and on every reload.
  static Result<std::shared_ptr<PolicyStore>> Open(const std::string& path,
                                                   const Clock* clock = &SystemClock::Instance(),
                                                   PolicyParseOptions options = {});
  static Result<std::shared_ptr<PolicyStore>> FromText(
      std::string_view json_text, const Clock* clock = &SystemClock::Instance(),
      PolicyParseOptions options = {});
  static std::shared_ptr<PolicyStore> FromPolicy(std::shared_ptr<const Policy> policy);

  // Re-reads the file given to Open(). On any error the old policy stays and
  // every error is returned; an empty vector means the new policy is live.
  std::vector<ConfigError> Reload();
  std::vector<ConfigError> ReloadFromText(std::string_view json_text);

  // An attachment: immutable, opaque to the store, owned by whoever attached
  // it (one owner per store; it casts it back). `Attach` builds the next one
  // for a reload into *out, or returns every error (then nothing changes).
  using Attachment = std::shared_ptr<const void>;
  using Attach = std::function<std::vector<ConfigError>(Attachment* out)>;
  // Reload / ReloadFromText that also rebuild the attachment: `attach` runs
  // after the parse (also after a failed one, so every error is reported) and
  // before the swap; the policy and the attachment are installed by the same
  // swap, with one generation, only when both succeeded. Without `attach`
  // (the overloads above) the attachment in place stays.
  std::vector<ConfigError> Reload(const Attach& attach);
  std::vector<ConfigError> ReloadFromText(std::string_view json_text, const Attach& attach);
  // Installs a first attachment beside the running policy (the same
  // generation): for a front end attaching before it decides anything.
  std::vector<ConfigError> SetAttachment(const Attach& attach);

  // The policy to decide with; never null. Hold the pointer for one decision.
  std::shared_ptr<const Policy> Current() const;
  // Same, with the generation that policy was installed as (read together).
  std::shared_ptr<const Policy> Current(uint64_t* generation) const;
  // What one swap published: the policy, its generation and the attachment
  // installed with it (null when none), read together.
  struct Snapshot {
    std::shared_ptr<const Policy> policy;  // never null
    uint64_t generation = 0;
    Attachment attachment;
  };
  Snapshot snapshot() const;
  // snapshot() for the request path: the same three, from this thread's cache
  // (no lock, no reference count change) while nothing was swapped since this
  // thread last read them; refreshed under the lock otherwise. The reference
  // stays valid until this thread calls it again, on any store; copy what must
  // live longer (an asynchronous decision copies the pointers it keeps).
  const Snapshot& SnapshotOnThisThread() const;
  // Starts at 1, +1 per successful reload.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  struct ReloadResult {
    bool ok = true;
    int64_t wall_time_ns = 0;  // when it was attempted (the store's Clock::WallNow)
    std::vector<ConfigError> errors;
  };
  ReloadResult last_reload() const;
  uint64_t reload_failures() const { return reload_failures_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }
  // The options every parse of this store uses (a dry run should too).
  const PolicyParseOptions& parse_options() const { return options_; }
  // The running policy's version and text (ParsedPolicy); "" for FromPolicy.
  std::string version() const;
  std::string text() const;

  explicit PolicyStore(std::shared_ptr<const Policy> policy, std::string path = "",
                       const Clock* clock = &SystemClock::Instance());

 private:
  std::vector<ConfigError> Install(ParsedPolicy parsed, const Attach* attach);

  const std::string path_;
  const Clock* const clock_;
  PolicyParseOptions options_;  // set once by Open / FromText
  // The pointer swap is guarded by a mutex rather than std::atomic<shared_ptr>:
  // libstdc++'s lock-bit implementation is invisible to ThreadSanitizer, and a
  // copy under an uncontended mutex costs about the same.
  mutable std::mutex current_mu_;
  std::shared_ptr<const Policy> current_;  // guarded by current_mu_
  Attachment attachment_;                  // guarded by current_mu_
  std::string version_;                    // guarded by current_mu_
  std::string text_;                       // guarded by current_mu_
  std::atomic<uint64_t> generation_{1};
  // +1 per swap under current_mu_ (a reload, or an attachment beside the same
  // generation): what SnapshotOnThisThread's cache compares.
  std::atomic<uint64_t> swaps_{1};
  const uint64_t id_;  // unique in the process: keys the per-thread caches
  std::atomic<uint64_t> reload_failures_{0};
  mutable std::mutex reload_mu_;  // serialises reloads; guards last_reload_
  ReloadResult last_reload_;
};

// How rate-limit state is reported in response headers.
enum class HeaderStyle {
  kDraft11,          // RateLimit-Policy + RateLimit structured fields (default)
  kDraft03,          // RateLimit-Limit / RateLimit-Remaining / RateLimit-Reset (delta seconds)
  kXRateLimit,       // X-RateLimit-Limit / -Remaining / -Reset, reset in delta seconds
  kXRateLimitEpoch,  // X-RateLimit-Limit / -Remaining / -Reset, reset as Unix epoch seconds
  kNone,             // no rate-limit headers (Retry-After is still sent on 429)
};
std::string_view HeaderStyleName(HeaderStyle style);  // "draft11", "draft03", "x-ratelimit", ...
bool ParseHeaderStyle(std::string_view name, HeaderStyle* out);
// A comma-separated list of styles ("draft11, draft03, x-ratelimit"), each
// rendered once per response. Refused, with *error saying why: an empty list or
// member, an unknown or repeated style, "none" beside another style, and
// x-ratelimit with x-ratelimit-epoch (both would send X-RateLimit-Reset).
// "none" alone gives an empty list.
bool ParseHeaderStyles(std::string_view list, std::vector<HeaderStyle>* out, std::string* error);
// The list back as text: "draft11,x-ratelimit"; "none" when empty.
std::string HeaderStylesName(std::span<const HeaderStyle> styles);

// Where a trusted proxy puts the client address.
enum class ForwardedHeader { kXForwardedFor, kForwarded };

struct JwtOptions {
  std::string hs256_secret;          // verify HS256 tokens with this secret (raw bytes)
  std::string rs256_public_key_pem;  // verify RS256 tokens with this PEM public key
  // The token was verified by a gateway in front of us: trust its claims without
  // checking the signature (exp/nbf are still checked).
  bool verified_upstream = false;
  std::chrono::seconds leeway{30};  // clock skew allowed for exp / nbf
  std::string issuer;               // if set, `iss` must equal it
  std::string audience;             // if set, `aud` must equal or contain it
};
// Whether Enforcer::Create would accept these options (e.g. a PEM that is not
// an RSA public key): kInvalidArgument saying why, checked once at startup.
Status ValidateJwtOptions(const JwtOptions& options);

struct RollbackTransition;  // below: a change of a rule's rollback guard

// How an answer is rendered: the rate-limit header styles, Retry-After's
// jitter and the reason and unenforced headers. EnforcerOptions carries the
// Enforcer's own (HTTP's); a front end that answers differently on the same
// Enforcer (the Envoy adapter) decides through an Enforcer::FrontEnd with
// its own (Enforcer::AddFrontEnd), per call, never a second Enforcer.
struct ResponseOptions {
  // The header styles every answer carries, each once (ParseHeaderStyles'
  // rules; Create refuses a list they refuse). Empty: no rate-limit headers
  // (Retry-After is still sent on 429 and 503).
  std::vector<HeaderStyle> header_styles = {HeaderStyle::kDraft11};
  // Retry-After = ceil(wait * (1 + jitter_fraction * u)), u in [0,1) fixed per
  // identity (rule + key). 0 disables jitter. Valid range [0, 10]. On a 429 the
  // reset of every header style (RateLimit t, RateLimit-Reset, X-RateLimit-Reset)
  // of the denying policy equals the Retry-After sent. On a 503 (fail-closed)
  // `wait` is the time until the store's next probe (Store::UnavailableFor),
  // at least 1 s.
  double retry_after_jitter = 0.5;
  uint64_t jitter_seed = 0;  // same seed on every instance = same offset for a client everywhere
  std::string reason_header = "X-RateLimit-Reason";  // empty: not sent
  // Sent (value "store-unavailable") on a request allowed by a failure mode
  // that enforced nothing (fail-open), instead of RateLimit headers, so clients
  // and logs can tell an unenforced pass from a decision. Empty: not sent.
  std::string unenforced_header = "Tollgate-Unenforced";
};

// kInvalidArgument saying why when Enforcer::Create (or AddFrontEnd) would
// refuse `options`: a jitter outside [0, 10], a style list ParseHeaderStyles
// refuses, a header name other than letters, digits, '-' and '_'.
Status ValidateResponseOptions(const ResponseOptions& options);

// The response options (ResponseOptions, the base) are the Enforcer's own:
// Check, CheckAsync and CheckItems without a FrontEnd answer with them.
struct EnforcerOptions : ResponseOptions {
  // Peers allowed to tell us the client address ("10.0.0.0/8", "::1/128", "127.0.0.1").
  std::vector<std::string> trusted_proxies;
  ForwardedHeader forwarded_header = ForwardedHeader::kXForwardedFor;
  JwtOptions jwt;
  // RFC 9457 problem types: base + "quota-exceeded" / "temporary-reduced-capacity".
  std::string problem_type_base = "https://iana.org/assignments/http-problem-types#";
  // Whether the front end releases the leases of concurrency rules
  // (CheckOutcome::leases, Enforcer::Release) when a request ends. When false,
  // a request that a concurrency rule applies to is answered 503 (kUnavailable)
  // instead of taking a lease nobody would give back. Applies to the
  // synchronous and asynchronous calls alike (both take leases).
  bool releases_leases = false;
  // Called for notable events (rollback guard trips, JWT key problems). Never on
  // every request. Must be thread-safe. Null: messages go to stderr.
  std::function<void(std::string_view message)> log;
  // Called after every change of a rollback guard this Enforcer makes itself:
  // a trigger firing, TripRollback, and ResetRollback (a clear is reported
  // even when this instance was not tripped: others may be). Not called for
  // AdoptRollback, nor for the reset a changed rule gets on reload. Runs on
  // the thread that made the change (a decision's, possibly a store
  // callback's), outside the Enforcer's locks: must be thread-safe and must
  // not block (RollbackFleet::Publish queues). Null: nothing is shared.
  std::function<void(const RollbackTransition& change)> on_rollback;
  // Read the clock around the store calls and report them in
  // CheckOutcome::store_start_ns / store_end_ns (tracing's store span). Off by
  // default: two clock reads a decision that nobody else needs.
  bool time_store_calls = false;
};

// One explicit item for callers that name rule and key themselves (the HTTP
// decision API, the Envoy adapter). The bucket key is built exactly as Check()
// builds it, so an item {rule "free", key "k1"} shares the bucket of a request
// whose single limit key value is "k1" under rule "free".
struct RuleState;  // private to the policy layer (src/policy/rule_state.h)

// A rule's counters and rollback state, looked up by name once
// (Enforcer::HandleFor) instead of on every item: an item that carries one
// skips the Enforcer's lock and map lookup. Valid as long as the Enforcer that
// made it; a default-constructed handle is empty (the item is looked up by name).
class RuleHandle {
 public:
  RuleHandle() = default;
  bool valid() const { return state_ != nullptr; }
  RuleState* state() const { return state_; }

 private:
  friend class Enforcer;
  explicit RuleHandle(RuleState* state) : state_(state) {}
  RuleState* state_ = nullptr;
};

struct ExplicitItem {
  std::string_view rule = {};  // a rule name of the current policy; empty: see CheckItems
  std::string_view key = {};   // the identity; normalised and bounded like request values
  // Instead of `key`: the rule's limit_keys values in order (nullopt: that
  // source absent; a "const:" source's own constant or nullopt). The item then
  // shares the bucket (and tenant row, rollout, lease set) of a request whose
  // sources give these values, which `key` cannot name for a rule with several
  // limit_keys. Needs `rule`; a count other than the rule's limit_keys, or a
  // non-empty `key` beside it, is kInvalidArgument.
  std::span<const std::optional<std::string>> values = {};
  int64_t cost = 1;  // >= 0; 0 peeks
  // Optional ad-hoc limit (Envoy RateLimitOverride). With an empty rule it
  // makes an ad-hoc policy named `override_name` (default "override").
  std::optional<LimitSpec> limit_override = {};
  std::string_view override_name = {};

  // For front ends that keep their own rule table (the Envoy adapter,
  // server/rls): with an empty rule, these make the item a complete ad-hoc
  // rule named `override_name`, whose counters (Counters()) are kept by that
  // name like a policy rule's.
  // A validated limit to apply (borrowed for the call); takes precedence over
  // limit_override and is not validated again.
  const Limit* limit = nullptr;
  // Decided in shadow mode (ShadowReason::kConfigured): counted, never rejects.
  bool shadow = false;
  // Quota mode (envoyproxy/ratelimit's quota_mode): decided as a shadow item,
  // except that the call is rejected when EVERY quota store item of the call
  // with a cost is over its limit (denied_rule: the first of them). When only
  // some are over, the call is decided without them: the enforced items and
  // the quota items that fit are charged, the others are not. Ignored on
  // storeless items (the front end accounts for those). A quota item of cost
  // 0 counts as within its limit.
  bool quota = false;
  // A cost known already that must not be refused (a stream-end charge, the
  // Envoy adapter's `charge_only` descriptors): when the call is allowed,
  // CheckOutcome::settlement charges it to the item's key without a fit check
  // (Store::Settle: into debt, up to the store's bound) once the front end
  // settles (Enforcer::Settle). `cost` is still decided as usual (the Envoy
  // adapter sends 0 with `shadow`, so the charge is never refused). >= 0.
  int64_t settle_charge = 0;
  // The store key to use verbatim (a front end's own key layout); empty:
  // BucketKey(name, algorithm, normalised key).
  std::string_view bucket_key = {};
  // Decided without the store. kUnlimited always fits (remaining is INT64_MAX);
  // kDenyAll fits only a cost of 0, and when an enforced kDenyAll item has a
  // cost the call is rejected and its store items are only peeked (cost 0).
  // Neither needs a limit; their RuleOutcome::limit is a placeholder.
  enum class Storeless : uint8_t { kNo, kUnlimited, kDenyAll };
  Storeless storeless = Storeless::kNo;
  // The name in RateLimit headers and the problem body; empty: the rule name.
  std::string_view report_name = {};
  // With an empty rule: HandleFor(override_name, front end) of the Enforcer
  // and front end deciding the item, found once (a front end's compiled rule table); empty: looked
  // up by override_name under the Enforcer's lock.
  RuleHandle handle = {};
};

// What tripped a rule's rollback guard (seed 000's three triggers, or an admin).
enum class RollbackTrigger : uint8_t {
  kNone,
  kRejectRatio,         // rollback.max_reject_ratio
  kLatencyP99,          // rollback.max_p99_ms (decision latency)
  kUpstreamErrors,      // rollback.max_upstream_error_increase (gateway: upstream 5xx)
  kAdmin,               // Enforcer::TripRollback
  kUpstreamLatencyP99,  // rollback.max_upstream_p99_ms (gateway, middleware: upstream latency)
};
inline constexpr size_t kRollbackTriggerCount = 6;
// "none", "reject_ratio", "latency_p99", "upstream_errors", "admin",
// "upstream_latency_p99".
std::string_view RollbackTriggerName(RollbackTrigger trigger);
// The trigger named `name` (RollbackTriggerName's words); kNone for any other text.
RollbackTrigger RollbackTriggerFromName(std::string_view name);

// A change of one rule's rollback guard, for sharing it across a fleet
// (tollgate/rollback_fleet.h): EnforcerOptions::on_rollback reports the
// changes an Enforcer makes itself, Enforcer::AdoptRollback applies another
// instance's.
struct RollbackTransition {
  std::string rule;
  // RollbackFingerprint of the rule's definition: an instance adopts a
  // transition only for a rule whose definition is the same.
  uint64_t fingerprint = 0;
  bool tripped = false;                              // tripped, else cleared
  RollbackTrigger trigger = RollbackTrigger::kNone;  // why, when tripped
  std::string reason;                                // in words, when tripped
  bool by_operator = false;  // TripRollback / ResetRollback, not the guard itself
  std::string origin;        // AdoptRollback: the instance that made it
};

// The outcome of one rule for one request.
struct RuleOutcome {
  // kSoft: a soft rule ("soft": true), decided like a shadow rule (never
  // refuses, charges nothing once over) but reported to the client: its
  // RateLimit fields (r=0 when over) and kSoftExceededHeader.
  enum class ShadowReason { kNone, kConfigured, kRollout, kRollback, kSoft };

  std::string rule;  // rule name
  std::string
      key;  // the identity part of the bucket key (normalised, printable; never a metric label)
  int64_t cost = 0;
  bool shadow = false;  // decided in shadow mode (or soft): counted and logged, never rejects
  ShadowReason shadow_reason = ShadowReason::kNone;
  std::optional<Limit> limit;  // the limit applied (a copy: valid after a reload); always set
  Decision decision;
  // Enforced and its rollback guard watches upstream answers (5xx ratio or
  // latency): a front end that forwards the request, or a middleware that
  // calls the handler, reports the answer (Enforcer::RecordUpstream).
  bool watches_upstream = false;
  // The rule's action: "limit", or "allow", "deny", "unlimited" for a rule
  // decided without a limit (`limit` is then a placeholder). Static text.
  std::string_view action = "limit";
  // A store rule of a call that was only peeked (an enforced deny-all item
  // rejected it, so nothing was charged): whether `cost` would fit now, and
  // if not, the wait until it would (buckets by their GCRA arithmetic,
  // windows at their end; Decision::kNever above the burst). Report only,
  // never a decision. Unset otherwise.
  struct Peek {
    bool fits = true;
    Nanos wait{0};
  };
  std::optional<Peek> peek;
  bool soft() const { return shadow_reason == ShadowReason::kSoft; }
  // A soft rule over its limit: the request was admitted and told so.
  bool soft_exceeded() const { return soft() && !decision.allowed; }
};

// A lease a concurrency rule took for an allowed request; give it back with
// Enforcer::Release when the request ends (else it comes back at its expiry).
struct HeldLease {
  std::string rule;
  std::string key;  // the store key
  std::string id;
};

// How a request's exchange ended, for its settlement (Enforcer::Settle): what
// the upstream answered (gateway) or the handler produced (middleware).
struct ResponseOutcome {
  enum class Kind : uint8_t {
    kResponse,      // a response came: `status`
    kTimeout,       // the upstream did not answer in time (the gateway sent 504)
    kConnectError,  // the upstream could not be reached (502)
    kBroken,        // the upstream answered nothing valid or broke off (502)
  };
  Kind kind = Kind::kResponse;
  int status = 0;  // the upstream's (or handler's) status; kResponse only
  // The response fields Settlement::response_fields() names (lower-case names),
  // as received: a trailer field's value replaces the header's. Hostile:
  // parsed strictly (ParseResponseCost); a missing or bad value charges the
  // rule's default_cost and is counted.
  std::vector<HeaderField> fields;
  // cost_source "handler": the cost the handler reported, if it did.
  std::optional<int64_t> handler_cost;
  // The client went away before the response ended, and the upstream did not
  // finish it within the gateway's abort drain (gateway.abort_drain_ms and
  // abort_drain_bytes): a cost after the response charges the rule's
  // abort_cost, or the cost reported so far when that is larger.
  bool client_aborted = false;
};

class Settlement;

struct CheckOutcome {
  enum class Verdict { kAllow, kReject, kUnavailable };
  Verdict verdict = Verdict::kAllow;
  int http_status = 200;             // 200 allow, 429 reject, 503 unavailable (fail-closed)
  bool enforced = true;              // false when a failure mode answered without a store decision
  std::vector<RuleOutcome> rules;    // every rule that applied, in policy order
  int denied_rule = -1;              // index into rules of the rule that denied, or -1
  std::vector<HeaderField> headers;  // to add to the response, allowed or not
  std::string body;                  // application/problem+json when not allowed
  Nanos delay{0};                    // leaky-bucket shaping: wait this long, then proceed
  int64_t retry_after_seconds = 0;   // the Retry-After sent (0 when none)
  Status status;                     // why kUnavailable (the store error), ok otherwise
  std::vector<HeldLease> leases;     // allowed only: the concurrency leases to release
  uint64_t policy_generation = 0;    // PolicyStore generation decided with
  // Clock::Now() before the first and after the last store call, with
  // EnforcerOptions::time_store_calls; both 0 otherwise or when no store was called.
  int64_t store_start_ns = 0;
  int64_t store_end_ns = 0;
  // Explain() only: one line per rule considered ("free: applies, key k1, cost 1",
  // "enterprise: skipped, match jwt:plan failed").
  std::vector<std::string> trace;

  // Allowed only, and only when an enforced rule takes its cost from the
  // response or refunds: give it to Enforcer::Settle (or SettleAsync) when the
  // response ends. Null otherwise. An outcome never settled keeps its
  // up-front charges (the estimate of a response-cost rule).
  std::shared_ptr<Settlement> settlement;
  bool allowed() const { return verdict == Verdict::kAllow; }
};

// "allow", "reject" or "unavailable": the verdict's name in JSON, logs and the CLI.
std::string_view VerdictName(CheckOutcome::Verdict v);

// Per-rule counters kept by the Enforcer, by rule name (kept across reloads).
// Front ends export these; they need not count CheckOutcomes themselves.
struct RuleCounters {
  std::string rule;
  // One uint64_t per counter of tollgate/rule_counters.h, which says what each
  // counts: allowed, rejected, shadow_rejected, unenforced, unavailable,
  // blocked, soft_exceeded, missing_key, leases_acquired, leases_released, leases_expired, settled,
  // settled_cost, response_cost_invalid, settle_failures, rollback_clears,
  // rollback_adopted_trips, rollback_adopted_clears.
#define TOLLGATE_RULE_COUNTER_FIELD(field, label) uint64_t field = 0;
  TOLLGATE_ALL_RULE_COUNTERS(TOLLGATE_RULE_COUNTER_FIELD)
#undef TOLLGATE_RULE_COUNTER_FIELD
  // Refunds made, by the refund_on entry that matched ("5xx", "timeout", ...).
  std::vector<std::pair<std::string, uint64_t>> refunds;
  bool rolled_back = false;     // the rollback guard switched this rule to shadow
  std::string rollback_reason;  // why, when rolled_back
  RollbackTrigger rollback_trigger = RollbackTrigger::kNone;  // which, when rolled_back
  // Trips so far by trigger (index = RollbackTrigger; kNone stays 0).
  std::array<uint64_t, kRollbackTriggerCount> rollback_trips{};
  // The instance whose trip this rule adopted (AdoptRollback); empty when
  // this instance tripped it, or when not rolled back.
  std::string rollback_origin;
  // The fingerprint of the rule's definition this Enforcer decides with
  // (Enforcer::RollbackFingerprint once a decision or adoption used it); 0
  // for ad-hoc rules.
  uint64_t rollback_fingerprint = 0;
};

class Enforcer {
 public:
  // Fails with kInvalidArgument on bad options (CIDR, PEM key, jitter range).
  static Result<std::unique_ptr<Enforcer>> Create(std::shared_ptr<PolicyStore> policies,
                                                  Store* store, const Clock* clock,
                                                  EnforcerOptions options = {});
  ~Enforcer();

  // Decides `request` against the current policy: charges the store (all rules
  // together, all-or-nothing) and renders headers and body.
  CheckOutcome Check(const RequestView& request);

  // Same through Store::AcquireAsync; `done` runs exactly once, inline or on a
  // store thread. The request is only read before CheckAsync returns.
  void CheckAsync(const RequestView& request, std::function<void(CheckOutcome)> done);

  // Which rules apply, with keys, costs and each bucket's current state (cost-0
  // peeks). Charges nothing and counts nothing; fills CheckOutcome::trace.
  CheckOutcome Explain(const RequestView& request);

  // A front end that decides explicit items from a rule table of its own on
  // this Enforcer (the Envoy adapter): how its answers are rendered, and the
  // states and counters of its ad-hoc rules (ExplicitItem::override_name),
  // kept apart from the policy's and from other front ends' (a policy rule
  // and an Envoy rule of the same name never share counters or a guard).
  // Opaque; owned by the Enforcer and valid for its life.
  class FrontEnd;
  // Adds one (kInvalidArgument: `response` refused, ValidateResponseOptions).
  // Typically once per front end at startup; never removed.
  Result<FrontEnd*> AddFrontEnd(ResponseOptions response);

  // Decides explicit items together (all-or-nothing). Unknown rule names and an
  // empty rule without limit_override (when the policy has more than one rule)
  // are kInvalidArgument. Mode, rollout and rollback of named rules apply.
  // With `front_end`, its response options render the answer and its table
  // holds the ad-hoc rules; without, the Enforcer's own.
  Result<CheckOutcome> CheckItems(std::span<const ExplicitItem> items,
                                  FrontEnd* front_end = nullptr);
  // Same through Store::AcquireAsync; `done` runs exactly once, inline (always
  // for an invalid item) or on a store thread. `items` (and what they point
  // to) are only read before CheckItemsAsync returns.
  void CheckItemsAsync(std::span<const ExplicitItem> items,
                       std::function<void(Result<CheckOutcome>)> done,
                       FrontEnd* front_end = nullptr);

  // The handle of the ad-hoc rule `name` (ExplicitItem::handle) in
  // `front_end`'s table (null: the Enforcer's own): its counters and rollback
  // state, created on first use and kept for the Enforcer's life. An item
  // carrying it must be decided with the same `front_end`.
  RuleHandle HandleFor(std::string_view name, FrontEnd* front_end = nullptr);

  // Gives back the leases of an allowed outcome (CheckOutcome::leases) when
  // its request ends. Blocking (a store call per lease): never call it from a
  // store callback. Returns the first store error; a lease that was already
  // released or had expired is not an error.
  Status Release(std::span<const HeldLease> leases);
  // The same without blocking (safe on an event loop and in a store
  // callback): `done`, if given, runs once with how many leases were still
  // live, inline or on a store thread.
  void ReleaseAsync(std::vector<HeldLease> leases,
                    std::function<void(int64_t released)> done = nullptr);
  // Settles an allowed outcome's charges once its response has ended
  // (CheckOutcome::settlement): charges a response-cost rule the cost the
  // response reported (beyond its up-front estimate, possibly into debt) and
  // refunds the rules whose refund_on matches `response`. Exactly once per
  // Settlement: later calls do nothing and return ok. Blocking; never call it
  // from a store callback. Returns the first store error (the estimate stays).
  Status Settle(Settlement& settlement, const ResponseOutcome& response);
  // The same without blocking (safe on an event loop and in a store
  // callback); `done`, if given, runs once, inline or on a store thread.
  void SettleAsync(std::shared_ptr<Settlement> settlement, ResponseOutcome response,
                   std::function<void(Status)> done = nullptr);

  // The client address after trusted-proxy processing ("203.0.113.7").
  std::string ClientIp(const RequestView& request) const;

  // The rules' counters: the policy's and the Enforcer's own ad-hoc rules,
  // or (with `front_end`) that front end's ad-hoc rules only.
  std::vector<RuleCounters> Counters(const FrontEnd* front_end = nullptr) const;
  // Clears a tripped rollback guard (admin). Returns false for an unknown rule.
  bool ResetRollback(std::string_view rule);
  // Trips the guard of `rule` by hand (admin): the rule decides in shadow until
  // cleared. False for a rule the current policy does not have.
  bool TripRollback(std::string_view rule, std::string_view reason);
  // Applies a transition another instance made (RollbackFleet): a trip puts
  // the rule in shadow with `change`'s trigger, reason and origin, a clear
  // resets its guard; only when the current policy has the rule with
  // `change.fingerprint`. Counted as adopted, not as this instance's trips
  // or clears; never calls on_rollback. Returns whether the guard changed.
  bool AdoptRollback(const RollbackTransition& change);
  // The fingerprint of the current policy's rule `rule`, or 0 when it has none.
  uint64_t RollbackFingerprint(std::string_view rule) const;
  // Reports the upstream's answer to a request `outcome` allowed (gateway
  // mode, middleware): feeds the upstream-error and upstream-latency triggers
  // of every rule with watches_upstream. `status` is the HTTP status, or
  // 502/504 when the upstream gave none; `latency` the time from forwarding
  // the request (or calling the handler) to its answer, negative when unknown
  // (the latency trigger then ignores the answer). Cheap when no rule watches.
  void RecordUpstream(const CheckOutcome& outcome, int status, Nanos latency = Nanos(-1));

  const EnforcerOptions& options() const;
  PolicyStore& policies() const;

  // Lease tokens for front ends that hand leases to clients (/v1/decide):
  // "<lease id>.<store key in hex>", at most kMaxLeaseTokenLength characters.
  // Not a secret beyond the id's 128 random bits; a forged or stale token only
  // releases nothing. ParseLeaseToken refuses (kInvalidArgument, saying why)
  // a malformed token and one whose key is not a concurrency rule of the
  // current policy, so a release can only ever touch a lease set.
  static constexpr size_t kMaxLeaseTokenLength = 2048;
  static std::string LeaseToken(const HeldLease& lease);
  Result<HeldLease> ParseLeaseToken(std::string_view token) const;

  class Impl;

 private:
  explicit Enforcer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Gives back an allowed outcome's leases when it goes out of scope (RAII):
// hold one for as long as the request is in flight. Releases through
// Enforcer::ReleaseAsync, so destroying it never blocks. Move-only; the
// Enforcer must outlive it.
class LeaseRelease {
 public:
  LeaseRelease() = default;
  LeaseRelease(Enforcer& enforcer, std::vector<HeldLease> leases)
      : enforcer_(&enforcer), leases_(std::move(leases)) {}
  LeaseRelease(LeaseRelease&& other) noexcept
      : enforcer_(std::exchange(other.enforcer_, nullptr)), leases_(std::move(other.leases_)) {
    other.leases_.clear();
  }
  LeaseRelease& operator=(LeaseRelease&& other) noexcept;
  LeaseRelease(const LeaseRelease&) = delete;
  LeaseRelease& operator=(const LeaseRelease&) = delete;
  ~LeaseRelease();

  const std::vector<HeldLease>& leases() const { return leases_; }

 private:
  Enforcer* enforcer_ = nullptr;
  std::vector<HeldLease> leases_;
};

// An allowed request's charges awaiting its response (Enforcer::Settle). Made
// by the Enforcer; front ends only read which response fields to capture.
// Thread safety: settle from one thread at a time; the exactly-once flag is
// atomic. The Enforcer must outlive it.
class Settlement {
 public:
  struct Item;
  Settlement();
  ~Settlement();
  Settlement(const Settlement&) = delete;
  Settlement& operator=(const Settlement&) = delete;

  // Lower-case names of the response fields (header or trailer) the rules read.
  const std::vector<std::string>& response_fields() const { return fields_; }
  // Whether a rule takes its cost from the handler (cost_source "handler").
  bool wants_handler_cost() const { return handler_cost_; }
  bool settled() const { return settled_.load(std::memory_order_acquire); }

 private:
  friend class Enforcer;
  friend class Enforcer::Impl;
  std::vector<Item> items_;
  std::vector<std::string> fields_;
  bool handler_cost_ = false;
  int64_t admitted_at_ns_ = 0;  // the Enforcer's clock when the charge was decided
  std::atomic<bool> settled_{false};
};

// A response cost as sent by an upstream: optional spaces or tabs around 1 to
// 18 ASCII digits (no sign, no fraction, no exponent). False otherwise.
bool ParseResponseCost(std::string_view text, int64_t* out);

// The bucket key for (rule, identity): "<rule>\x1f<algorithm>\x1f<identity>".
// Rule names cannot contain \x1f; identities are escaped (see docs), so the
// layout is unambiguous. Changing a rule's rate/burst keeps its keys; changing
// its algorithm starts a fresh key space (the state words differ).
std::string BucketKey(std::string_view rule, Algorithm algorithm, std::string_view identity);

// The bucket of rule `rule` for the identity `values`, derived exactly as
// Check() derives it for a request whose limit_keys sources hold those values
// (one value per limit_keys entry, in order; nullopt: the source was absent,
// the bucket missing_key "shared" uses): each value normalised, joined, then
// BucketKey. Key administration (tollgated's /v1/keys/*) names keys this way,
// so what an operator resets is the bucket requests are decided on.
struct RuleKey {
  std::string rule;
  std::string identity;    // as RuleOutcome::key reports it
  std::string bucket_key;  // the store key
  Limit limit;             // what the store decides the key with: its tenant row, else the rule's
  std::vector<std::string> limit_keys;  // the rule's sources, as written
  // A rule with block_for: the key's penalty box (its store key and limit;
  // docs/configuration.md, "Penalty box"); empty / unset otherwise.
  std::string block_key;
  std::optional<Limit> block_limit;
};
struct RuleKeyResult {
  bool rule_found = false;     // false: `policy` has no rule named `rule`
  Status status;               // kInvalidArgument naming the value that is wrong
  std::optional<RuleKey> key;  // set when rule_found and status is ok
};
// Refuses a count of values other than the rule's limit_keys, a value for a
// "const:" source other than its constant (or nullopt, which means it), and
// an allow, deny or unlimited rule (decided without the store: no state) and
// a concurrency rule (its leases are not a bucket).
RuleKeyResult KeyForRule(const Policy& policy, std::string_view rule,
                         std::span<const std::optional<std::string>> values);

}  // namespace tollgate

#endif  // TOLLGATE_POLICY_H_
