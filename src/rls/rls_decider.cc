// The Envoy engine's decision: descriptors -> explicit items -> Enforcer ->
// statuses, with the configuration of one PolicyStore snapshot.
//
// Planning (PlanDescriptors) is the one place where unknown domains, rule
// matching, `replaces`, `unlimited`, deny-all rules and descriptor limit
// overrides are handled. Deciding is the Enforcer's. Answering (Answer) turns
// the CheckOutcome into per-descriptor statuses, counts hits the way
// envoyproxy/ratelimit does and copies the Enforcer's rate-limit headers.
#include "rls/rls_decider.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <set>

#include <google/protobuf/struct.pb.h>

#include "base/one_shot.h"
#include "rls/rls_key.h"
#include "tollgate/policy_headers.h"

namespace tollgate::rls {

namespace {

// Any cost above every possible burst is simply "over"; keep it far from overflow.
constexpr uint64_t kMaxCost = uint64_t{1} << 62;

enum class Kind { kNone, kUnlimited, kDenyAll, kStore };

// One request descriptor.
struct Slot {
  Kind kind = Kind::kNone;
  bool shadow = false;
  bool quota = false;        // quota_mode: over when every quota descriptor of the call is
  bool charge_only = false;  // a cost > 0 is charged at settlement, never refused
  int64_t cost = 1;
  uint32_t requests_per_unit = 0;
  RlsUnit unit = RlsUnit::kUnknown;
  std::string name;  // rate_limit.name, reported in current_limit
  RuleHits* hits = nullptr;
  size_t item = 0;  // index into Call::items (and CheckOutcome::rules), unless kNone
  // Backing storage of the item's string views and limit.
  std::string rule;  // the Enforcer's rule name: the stats key
  std::string report_name;
  std::string key;
  std::optional<Limit> own_limit;                      // a descriptor's limit override
  const google::protobuf::Struct* metadata = nullptr;  // the rule's, owned by the config
  RuleHandle handle;  // the configured rule's, found when the config was attached
};

struct Call {
  std::shared_ptr<const RlsAttached> attached;  // keeps `config` alive
  const RlsConfig* config = nullptr;
  const rlspb::RateLimitRequest* request = nullptr;
  rlspb::RateLimitResponse* response = nullptr;
  bool response_metadata = false;  // RlsDecideOptions::response_metadata
  RlsDecider::Done done;
  std::vector<Slot> slots;
  std::vector<ExplicitItem> items;
  size_t store_items = 0;
  bool deny_all_enforced = false;  // an enforced deny-all rule with a cost rejects the call
  bool settles = false;            // a charge_only descriptor charges at settlement
  // The request-time checks (charge_only descriptors of cost 0), peeked
  // before the decision; checks_over: one found its bucket without a whole
  // token, so the call is OVER_LIMIT and decided as a peek (charges nothing).
  std::vector<ExplicitItem> checks;
  bool checks_over = false;
  Enforcer* enforcer = nullptr;  // settles the outcome's charges
  int64_t start_ns = 0;          // steady clock, for the decision latency histogram
};

rlspb::RateLimitResponse::RateLimit::Unit ToProtoUnit(RlsUnit u) {
  return static_cast<rlspb::RateLimitResponse::RateLimit::Unit>(static_cast<int>(u));
}

uint32_t ClampU32(int64_t v) {
  if (v <= 0) return 0;
  return v > std::numeric_limits<uint32_t>::max() ? std::numeric_limits<uint32_t>::max()
                                                  : static_cast<uint32_t>(v);
}

void Count(std::atomic<uint64_t>& c, int64_t n) {
  c.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Seconds until the next `unit` boundary of wall time (envoyproxy/ratelimit's
// CalculateReset), for deny-all rules, which no bucket backs.
int64_t UnitReset(RlsUnit unit, const Clock& clock) {
  const int64_t s = UnitSeconds(unit);
  if (s <= 0) return 0;
  const int64_t now_s = clock.WallNow() / 1'000'000'000;
  return s - now_s % s;
}

std::string Where(int i) { return "descriptors[" + std::to_string(i) + "]"; }

// A descriptor's own limit (Envoy's `limit` override): it applies whatever the
// configuration says, never in shadow mode, in a bucket of its own.
std::optional<std::string> PlanOverride(
    const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& desc, int i,
    const std::string& domain, const std::vector<RlsEntry>& entries,
    const RlsDecideOptions& options, const RlsConfig& config, Slot& s) {
  const auto unit = static_cast<RlsUnit>(static_cast<int>(desc.limit().unit()));
  if (UnitSeconds(unit) == 0) return Where(i) + ".limit.unit: unknown unit";
  s.unit = unit;
  s.requests_per_unit = desc.limit().requests_per_unit();
  s.rule = domain + ".override";
  s.report_name = "override";
  s.hits = config.counters().ForRule(s.rule);
  if (s.requests_per_unit == 0) {
    s.kind = Kind::kDenyAll;
    return std::nullopt;
  }
  auto limit = LimitForUnit(unit, s.requests_per_unit, options.override_algorithm, 0);
  if (!limit.ok()) return Where(i) + ".limit: " + limit.status().message();
  s.own_limit = *limit;
  s.kind = Kind::kStore;
  // Keyed by the override itself: 10/DAY and 42/HOUR for one descriptor are
  // two buckets, so a changed override never answers from the old one's state.
  s.key = BucketKey("o" + LimitShape(*s.own_limit) + "." + std::to_string(s.requests_per_unit) +
                        "." + std::string(UnitName(unit)),
                    domain, entries);
  return std::nullopt;
}

// The configured rule of `match` for a descriptor.
void PlanRule(const RlsMatch& match, const std::string& domain, Slot& s) {
  const RlsRule& r = *match.rule;
  s.hits = r.counters;
  s.name = r.name;
  s.rule = r.full_key;
  s.report_name = r.name.empty() ? r.full_key : r.name;
  s.unit = r.unit;
  s.requests_per_unit = r.requests_per_unit;
  s.shadow = r.shadow_mode;
  s.quota = r.quota_mode;
  s.charge_only = r.charge_only;
  s.metadata = r.metadata.get();
  if (r.unlimited) {
    s.kind = Kind::kUnlimited;
  } else if (!r.limit) {
    s.kind = Kind::kDenyAll;
  } else {
    s.kind = Kind::kStore;
    s.own_limit = *r.limit;
    // A share_threshold bucket ("~s") never meets a per-value one across a
    // reload that turns the setting on or off.
    s.key = BucketKey(match.shared ? r.shape + "~s" : r.shape, domain, match.key_entries);
  }
}

// One explicit item per slot that a rule still applies to: a rule named in
// another matched rule's `replaces` drops out (an unlimited one stays: nothing
// replaces it; overrides have no name).
void MakeItems(const std::set<std::string_view>& replaced, Call& call) {
  for (Slot& s : call.slots) {
    if (s.kind != Kind::kNone && s.kind != Kind::kUnlimited && !s.name.empty() &&
        replaced.count(s.name) != 0) {
      s.kind = Kind::kNone;
    }
  }
  // Quota mode (upstream's rule): the call is over when every quota
  // descriptor with a limit is. The Enforcer groups the quota store items
  // (ExplicitItem::quota); deny-all ones are always over, so when they are
  // the whole group they simply reject, as enforced deny-all items.
  bool quota_all_deny = false;
  for (const Slot& s : call.slots) {
    if (!s.quota || s.shadow || (s.kind != Kind::kStore && s.kind != Kind::kDenyAll)) continue;
    if (s.kind == Kind::kStore || s.cost == 0) {
      quota_all_deny = false;
      break;
    }
    quota_all_deny = true;
  }
  for (Slot& s : call.slots) {
    if (s.kind == Kind::kNone) continue;
    ExplicitItem item{.key = s.key, .cost = s.cost, .override_name = s.rule};
    // Quota mode rides as shadow does, rejecting only when all quota items are over.
    item.shadow = s.shadow || (s.quota && !(quota_all_deny && s.kind == Kind::kDenyAll));
    item.quota = s.quota && !s.shadow && s.kind == Kind::kStore;
    if (s.charge_only && s.cost > 0 && s.kind == Kind::kStore) {
      // A stream-end charge: decided as a peek that cannot refuse, charged by
      // the Enforcer's settlement (into debt, as HTTP's cost after the response).
      item.cost = 0;
      item.shadow = true;
      item.settle_charge = s.cost;
      call.settles = true;
    }
    item.report_name = s.report_name;
    item.handle = s.handle;
    if (s.kind == Kind::kStore) {
      item.limit = &*s.own_limit;
      item.bucket_key = s.key;
      ++call.store_items;
    } else {
      item.storeless = s.kind == Kind::kUnlimited ? ExplicitItem::Storeless::kUnlimited
                                                  : ExplicitItem::Storeless::kDenyAll;
      if (s.kind == Kind::kDenyAll && !item.shadow && s.cost > 0) call.deny_all_enforced = true;
    }
    s.item = call.items.size();
    if (s.charge_only && s.cost == 0 && s.kind == Kind::kStore) call.checks.push_back(item);
    call.items.push_back(item);
  }
}

// Fills `call` from the request: one slot per descriptor, one explicit item
// per slot that a rule applies to. The one place unknown rules, overrides,
// `replaces`, `unlimited` and deny-all rules are handled. Returns a message
// for INVALID_ARGUMENT.
std::optional<std::string> PlanDescriptors(const rlspb::RateLimitRequest& request,
                                           const RlsDecideOptions& options, Call& call) {
  const std::string& domain = request.domain();
  const RlsConfig& config = *call.config;
  const int64_t request_cost = std::max<int64_t>(1, request.hits_addend());
  call.slots.resize(static_cast<size_t>(request.descriptors_size()));
  std::set<std::string_view> replaced;
  std::vector<RlsEntry> entries;
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& desc = request.descriptors(i);
    Slot& s = call.slots[static_cast<size_t>(i)];
    if (static_cast<size_t>(desc.entries_size()) > options.max_entries) {
      return Where(i) + ": more than " + std::to_string(options.max_entries) + " entries";
    }
    s.cost = desc.has_hits_addend()
                 ? static_cast<int64_t>(std::min<uint64_t>(desc.hits_addend().value(), kMaxCost))
                 : request_cost;
    entries.clear();
    for (const auto& e : desc.entries()) entries.push_back({e.key(), e.value()});
    if (desc.has_limit()) {
      if (auto error = PlanOverride(desc, i, domain, entries, options, config, s)) return error;
      continue;
    }
    const RlsMatch match = config.MatchForKey(domain, entries);
    if (match.rule == nullptr) {
      Count(config.counters().service().no_rule, 1);
      continue;
    }
    for (const std::string& name : match.rule->replaces) replaced.insert(name);
    PlanRule(match, domain, s);
    if (match.rule->index < call.attached->handles.size()) {
      s.handle = call.attached->handles[match.rule->index];
    }
  }
  MakeItems(replaced, call);
  return std::nullopt;
}

// Hits, as envoyproxy/ratelimit counts them: the cost, by what the rule said.
void CountHits(const Slot& s, bool over, const Decision* d, const Limit* limit) {
  Count(s.hits->total_hits, s.cost);
  if (over) {
    Count(s.hits->over_limit, s.cost);
    if (s.shadow) Count(s.hits->shadow_mode, s.cost);
    return;
  }
  Count(s.hits->within_limit, s.cost);
  if (d != nullptr && limit != nullptr && d->remaining * 5 < limit->burst()) {
    Count(s.hits->near_limit, s.cost);
  }
}

// When a bucket without a whole token (d, a peek) has one again: a token
// bucket once max(TAT, now) + one interval is within the tolerance; other
// algorithms when their window or meter resets.
Nanos UntilOneToken(const Decision& d, const Limit& limit) {
  if (limit.algorithm() != Algorithm::kTokenBucket) return d.reset_after;
  const int64_t wait = d.reset_after.count() - limit.tolerance_ns() + limit.IncrementFor(1);
  return Nanos(std::max<int64_t>(0, wait));
}

// The status of one descriptor with a rule: OVER_LIMIT when its cost did not
// fit, except in shadow mode (quota mode reports it, as upstream).
void AnswerSlot(const Slot& s, const RuleOutcome& r, const CheckOutcome& outcome, bool peeked,
                bool checks_over, const Clock& clock,
                rlspb::RateLimitResponse::DescriptorStatus* st) {
  if (s.kind == Kind::kUnlimited) {
    st->set_limit_remaining(std::numeric_limits<uint32_t>::max());
    CountHits(s, false, nullptr, nullptr);
    return;
  }
  auto* cl = st->mutable_current_limit();
  cl->set_requests_per_unit(s.requests_per_unit);
  cl->set_unit(ToProtoUnit(s.unit));
  cl->set_name(s.name);
  bool over = false;
  int64_t reset = 0;
  if (s.kind == Kind::kDenyAll) {
    over = s.cost > 0;
    reset = UnitReset(s.unit, clock);
  } else {
    const Decision& d = r.decision;
    const bool denied = outcome.denied_rule == static_cast<int>(s.item);
    // Peeked (a deny-all rule rejected the call): a shadow or quota rule is
    // over when its cost would not fit now, and reports when it would (the
    // Enforcer's RuleOutcome::peek).
    const bool soft_peek = (s.shadow || s.quota) && peeked && r.peek;
    if (s.charge_only) {
      // A charge never refuses; a check (cost 0) is over when the peek before
      // the decision found no whole token left (Decide).
      over = s.cost == 0 && checks_over && d.remaining <= 0;
    } else if (s.cost > 0 && outcome.enforced) {
      over = soft_peek ? !r.peek->fits : (!d.allowed || denied);
    }
    st->set_limit_remaining(ClampU32(d.remaining));
    Nanos wait = d.retry_after;
    if (over && soft_peek) wait = r.peek->wait;
    if (over && s.charge_only) wait = UntilOneToken(d, *s.own_limit);
    reset = CeilSeconds((over && wait != Decision::kNever) ? wait : d.reset_after);
  }
  st->mutable_duration_until_reset()->set_seconds(reset);
  st->mutable_duration_until_reset()->set_nanos(0);
  CountHits(s, over, s.kind == Kind::kStore ? &r.decision : nullptr,
            s.own_limit ? &*s.own_limit : nullptr);
  // A quota-mode descriptor reports OVER_LIMIT in its own status (upstream);
  // whether the call is over is the Enforcer's verdict (Answer).
  if (over && !s.shadow) st->set_code(rlspb::RateLimitResponse::OVER_LIMIT);
}

// Merges `src` into `dest` as upstream's mergeMetadata: a field already there
// stays (the first descriptor's wins), except that two mappings merge.
void MergeMetadata(const google::protobuf::Struct& src, google::protobuf::Struct* dest,
                   int depth = 0) {
  for (const auto& [name, value] : src.fields()) {
    auto& fields = *dest->mutable_fields();
    auto it = fields.find(name);
    if (it == fields.end()) {
      fields[name] = value;
    } else if (it->second.has_struct_value() && value.has_struct_value() && depth < 64) {
      MergeMetadata(value.struct_value(), it->second.mutable_struct_value(), depth + 1);
    }
  }
}

// envoyproxy/ratelimit's dynamic_metadata (ratelimitToMetadata, current
// main): the request's `domain`, its `descriptors` (`entries` as "key=value",
// `limit` when overridden, `hitsAddend` when set), the request's `hitsAddend`
// when not 0, and `metadata`: the merged `metadata` of the descriptors whose
// status is not OVER_LIMIT (unlimited ones excepted, as upstream).
void AddDynamicMetadata(const rlspb::RateLimitRequest& request, const std::vector<Slot>& slots,
                        rlspb::RateLimitResponse& resp) {
  auto& fields = *resp.mutable_dynamic_metadata()->mutable_fields();
  fields["domain"].set_string_value(request.domain());
  auto* descriptors = fields["descriptors"].mutable_list_value();
  for (const auto& desc : request.descriptors()) {
    auto& d = *descriptors->add_values()->mutable_struct_value()->mutable_fields();
    auto* entries = d["entries"].mutable_list_value();
    for (const auto& e : desc.entries()) {
      entries->add_values()->set_string_value(e.key() + "=" + e.value());
    }
    if (desc.has_limit()) d["limit"].set_string_value(desc.limit().ShortDebugString());
    if (desc.has_hits_addend()) {
      d["hitsAddend"].set_number_value(static_cast<double>(desc.hits_addend().value()));
    }
  }
  if (request.hits_addend() != 0) {
    fields["hitsAddend"].set_number_value(static_cast<double>(request.hits_addend()));
  }
  google::protobuf::Struct passed;
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (s.metadata == nullptr || s.kind == Kind::kUnlimited || s.kind == Kind::kNone) continue;
    if (resp.statuses(static_cast<int>(i)).code() == rlspb::RateLimitResponse::OVER_LIMIT) continue;
    MergeMetadata(*s.metadata, &passed);
  }
  if (passed.fields_size() > 0) *fields["metadata"].mutable_struct_value() = std::move(passed);
}

// The Enforcer's outcome -> the response (or UNAVAILABLE), and the counters.
struct HeadersToAdd {
  bool rate_limit = false;   // the header styles' fields
  bool retry_after = false;  // Retry-After on OVER_LIMIT
};

void Answer(const std::shared_ptr<Call>& shared, const Clock& clock, HeadersToAdd headers,
            Result<CheckOutcome> r) {
  Call& call = *shared;
  RlsCounters& counters = call.config->counters();
  ServiceCounters& service = counters.service();
  const bool failed = !r.ok() || r->verdict == CheckOutcome::Verdict::kUnavailable;
  if (!call.items.empty()) counters.ObserveDecision(SteadyNs() - call.start_ns);
  // A call with store rules is one decision sent to the store (as an HTTP request is).
  if (call.store_items > 0) counters.ObserveStoreCall(failed || !r->enforced);
  if (failed) {
    Count(service.store_errors, 1);
    call.response->Clear();
    const Status st = r.ok() ? r->status : r.status();
    return call.done(UnavailableError("rate limit store: " + st.ToString()));
  }
  const CheckOutcome& outcome = *r;
  if (!outcome.enforced) Count(service.unenforced, 1);
  rlspb::RateLimitResponse& resp = *call.response;
  bool over_limit = false;
  for (size_t i = 0; i < call.slots.size(); ++i) {
    const Slot& s = call.slots[i];
    auto* st = resp.add_statuses();
    st->set_code(rlspb::RateLimitResponse::OK);
    if (s.kind == Kind::kNone) continue;
    AnswerSlot(s, outcome.rules[s.item], outcome, call.deny_all_enforced, call.checks_over, clock,
               st);
  }
  // Over when an enforced descriptor is, or every quota descriptor is
  // (upstream's overall code), which is when the Enforcer rejected: nothing
  // was charged then.
  over_limit =
      outcome.enforced && (outcome.verdict == CheckOutcome::Verdict::kReject || call.checks_over);
  if (call.response_metadata) AddDynamicMetadata(*call.request, call.slots, resp);
  resp.set_overall_code(over_limit ? rlspb::RateLimitResponse::OVER_LIMIT
                                   : rlspb::RateLimitResponse::OK);
  Count(over_limit ? service.over_limit : service.ok, 1);
  if (headers.rate_limit || headers.retry_after) {
    for (const HeaderField& f : outcome.headers) {
      // The problem body's own headers belong to an HTTP 429/503 body Envoy does not send.
      if (f.name == "Content-Type" || f.name == "Cache-Control") continue;
      // A shadow-only call is OK: its Retry-After would tell Envoy nothing.
      const bool retry = f.name == "Retry-After";
      if (retry ? !(headers.retry_after && over_limit) : !headers.rate_limit) continue;
      auto* h = resp.add_response_headers_to_add();
      h->set_key(f.name);
      h->set_value(f.value);
    }
  }
  if (call.settles && outcome.settlement) {
    // The charges go to the store before the answer, so a client that reads
    // the answer finds them counted. A charge the store could not take is
    // UNAVAILABLE, as a decision it could not make.
    call.enforcer->SettleAsync(outcome.settlement, ResponseOutcome{}, [c = shared](Status st) {
      if (!st.ok()) {
        Count(c->config->counters().service().store_errors, 1);
        c->response->Clear();
        return c->done(UnavailableError("rate limit store: " + st.ToString()));
      }
      c->done(Status::Ok());
    });
    return;
  }
  call.done(Status::Ok());
}

}  // namespace

std::shared_ptr<const RlsAttached> AttachRlsConfig(Enforcer& enforcer,
                                                   Enforcer::FrontEnd* front_end,
                                                   std::shared_ptr<const RlsConfig> config,
                                                   bool resolve_handles) {
  // Borrowed: the Enforcer outlives the registry's readers (no reference
  // cycle through the PolicyStore's attachment). Only the front end's rules:
  // the policy's are HTTP's.
  config->counters().SetDecisionSource(
      [e = &enforcer, front_end] { return e->Counters(front_end); });
  auto attached = std::make_shared<RlsAttached>();
  attached->handles.resize(resolve_handles ? config->rule_count() : 0);
  config->ForEachRule([&](const RlsRule& r) {
    if (r.index < attached->handles.size()) {
      attached->handles[r.index] = enforcer.HandleFor(r.full_key, front_end);
    }
  });
  attached->config = std::move(config);
  return attached;
}

std::vector<ConfigError> CheckRlsConfigFiles(const std::vector<std::string>& paths,
                                             const RlsCompileOptions& options) {
  RlsYamlResult read = ReadRlsYamlFiles(paths);
  std::vector<ConfigError> errors = std::move(read.errors);
  if (!read.domains.empty() || errors.empty()) {
    auto compiled = CompileRlsConfig(read.domains, options);
    errors.insert(errors.end(), compiled.errors.begin(), compiled.errors.end());
  }
  return errors;
}

namespace {

const RlsAttached* AttachedOf(const PolicyStore::Attachment& a) {
  return static_cast<const RlsAttached*>(a.get());
}

}  // namespace

CompanionConfig RlsCompanion(const PolicyStore& policies, Enforcer& enforcer,
                             Enforcer::FrontEnd* front_end, std::vector<std::string> paths,
                             RlsCompileOptions options, bool resolve_handles) {
  CompanionConfig c;
  c.name = "rls_config";
  c.check = [paths, options] { return CheckRlsConfigFiles(paths, options); };
  c.compile = [&policies, &enforcer, front_end, paths, options,
               resolve_handles](PolicyStore::Attachment* out) {
    // The counters registry lives across reloads: the running one's, if any.
    std::shared_ptr<RlsCounters> counters;
    if (const RlsAttached* now = AttachedOf(policies.snapshot().attachment)) {
      counters = now->config->shared_counters();
    }
    ParsedRlsConfig parsed = LoadRlsConfigFiles(paths, options, std::move(counters));
    if (parsed.config) *out = AttachRlsConfig(enforcer, front_end, parsed.config, resolve_handles);
    return parsed.errors;
  };
  c.installed = [&policies] {
    if (const RlsAttached* now = AttachedOf(policies.snapshot().attachment)) {
      Count(now->config->counters().service().config_reloads, 1);
    }
  };
  return c;
}

ResponseOptions EnvoyResponseOptions(const RlsDecideOptions& options) {
  ResponseOptions r;
  r.header_styles = options.header_styles;
  r.retry_after_jitter = options.retry_after_jitter;
  r.jitter_seed = options.jitter_seed;
  r.reason_header.clear();  // Envoy forwards only rate-limit headers and Retry-After
  r.unenforced_header.clear();
  return r;
}

RlsDecider::RlsDecider(const PolicyStore* policies, Enforcer* enforcer,
                       Enforcer::FrontEnd* front_end, const Clock* clock, RlsDecideOptions options)
    : policies_(policies),
      enforcer_(enforcer),
      front_end_(front_end),
      clock_(clock),
      options_(std::move(options)) {}

Result<std::unique_ptr<RlsDecider>> RlsDecider::Standalone(Enforcer* enforcer,
                                                           std::shared_ptr<const RlsConfig> config,
                                                           const Clock* clock,
                                                           RlsDecideOptions options) {
  if (enforcer == nullptr || !config || clock == nullptr) {
    return InvalidArgument("rls: an Enforcer, a configuration and a clock are required");
  }
  Result<Enforcer::FrontEnd*> front_end = enforcer->AddFrontEnd(EnvoyResponseOptions(options));
  if (!front_end.ok()) return InvalidArgument("rls: " + front_end.status().message());
  std::unique_ptr<RlsDecider> decider(
      new RlsDecider(&enforcer->policies(), enforcer, *front_end, clock, std::move(options)));
  decider->standalone_ = true;
  decider->SetConfig(std::move(config));
  return decider;
}

std::shared_ptr<const RlsConfig> RlsDecider::config() const {
  const PolicyStore::Attachment a = policies_->snapshot().attachment;
  const RlsAttached* attached = AttachedOf(a);
  return attached ? attached->config : nullptr;
}

RlsDecider::~RlsDecider() = default;

void RlsDecider::SetConfig(std::shared_ptr<const RlsConfig> config) {
  if (!standalone_) return;  // the engine's configuration reloads with its Runtime
  const bool first = !this->config();
  auto attached =
      AttachRlsConfig(*enforcer_, front_end_, std::move(config), options_.resolve_rule_handles);
  RlsCounters& counters = attached->config->counters();
  enforcer_->policies().SetAttachment([&](PolicyStore::Attachment* out) {
    *out = std::move(attached);
    return std::vector<ConfigError>{};
  });
  if (!first) Count(counters.service().config_reloads, 1);  // the first is no reload
}

void RlsDecider::Decide(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response,
                        Done done, uint64_t* generation) {
  auto call = std::make_shared<Call>();
  call->start_ns = SteadyNs();
  {
    // One snapshot: the configuration and its generation, read together (this
    // thread's cached copy: no lock; the call keeps its own reference).
    const PolicyStore::Snapshot& snapshot = policies_->SnapshotOnThisThread();
    if (generation) *generation = snapshot.generation;
    call->attached = std::static_pointer_cast<const RlsAttached>(snapshot.attachment);
  }
  response->Clear();
  if (!call->attached) return done(UnavailableError("rls: no configuration installed"));
  call->config = call->attached->config.get();
  call->request = &request;
  call->response = response;
  call->response_metadata = options_.response_metadata;
  call->enforcer = enforcer_;
  call->done = std::move(done);
  RlsCounters& counters = call->config->counters();
  ServiceCounters& service = counters.service();
  Count(service.requests, 1);

  auto invalid = [&](std::string message) {
    Count(service.invalid_request, 1);
    call->done(InvalidArgument(std::move(message)));
  };
  if (request.domain().empty()) return invalid("rate limit domain must not be empty");
  if (request.descriptors_size() == 0) {
    return invalid("rate limit descriptor list must not be empty");
  }
  if (static_cast<size_t>(request.descriptors_size()) > options_.max_descriptors) {
    return invalid("more than " + std::to_string(options_.max_descriptors) + " descriptors");
  }
  if (!call->config->HasDomain(request.domain())) {
    // Like envoyproxy/ratelimit: no limits apply, the answer is OK.
    Count(service.unknown_domain, 1);
    for (int i = 0; i < request.descriptors_size(); ++i) {
      response->add_statuses()->set_code(rlspb::RateLimitResponse::OK);
    }
    response->set_overall_code(rlspb::RateLimitResponse::OK);
    if (call->response_metadata) AddDynamicMetadata(request, call->slots, *response);
    Count(service.ok, 1);
    return call->done(Status::Ok());
  }
  if (auto error = PlanDescriptors(request, options_, *call)) return invalid(std::move(*error));

  const Clock* clock = clock_;
  const HeadersToAdd headers{!options_.header_styles.empty(), options_.retry_after};
  Enforcer* enforcer = enforcer_;
  Enforcer::FrontEnd* front_end = front_end_;
  auto decide = [call, clock, headers, enforcer, front_end] {
    enforcer->CheckItemsAsync(
        call->items,
        [call, clock, headers](Result<CheckOutcome> r) {
          Answer(call, *clock, headers, std::move(r));
        },
        front_end);
  };
  if (call->checks.empty()) return decide();
  // Request-time checks of stream-end budgets: peeked first (cost 0), so that
  // a bucket without a whole token makes the call OVER_LIMIT before anything
  // is charged; then the call is decided (as a peek when one was empty). Not
  // atomic with the decision: the stream-end charges that empty a bucket are
  // never refused anyway (docs/envoy.md, "Costs known at stream end").
  enforcer_->CheckItemsAsync(
      call->checks,
      [call, decide](Result<CheckOutcome> r) {
        if (r.ok() && r->verdict != CheckOutcome::Verdict::kUnavailable && r->enforced) {
          for (const RuleOutcome& rule : r->rules) {
            if (rule.decision.remaining <= 0) call->checks_over = true;
          }
        }
        if (call->checks_over) {
          for (ExplicitItem& item : call->items) {
            item.cost = 0;
            item.settle_charge = 0;
          }
          call->settles = false;
        }
        decide();
      },
      front_end_);
}

Status RlsDecider::DecideSync(const rlspb::RateLimitRequest& request,
                              rlspb::RateLimitResponse* response, uint64_t* generation) {
  // On the stack: Wait() returns only once the callback has run.
  base::OneShot<Status> result;
  Decide(
      request, response, [&](Status st) { result.Set(std::move(st)); }, generation);
  return result.Wait();
}

}  // namespace tollgate::rls
