// Enforcer: request -> plan of (rule, key, cost) items -> one all-or-nothing
// store batch -> CheckOutcome with headers and body.
//
// Batch layout: enforced items first, then shadow items. If only a shadow item
// did not fit, the enforced items are decided again on their own (a shadow
// rule must never reject), which is the only case needing a second round trip.
#include <algorithm>
#include <cstdio>
#include <map>

#include "policy/client_ip.h"
#include "policy/jwt.h"
#include "policy/policy_impl.h"
#include "policy/request_context.h"
#include "policy/rule_state.h"
#include "tollgate/policy.h"
#include "tollgate/policy_headers.h"

namespace tollgate {
namespace {

// Identity value standing for an absent key source (missing_key: shared). A
// normalised value never holds a backslash followed by 'm', so no request can
// name this bucket.
constexpr std::string_view kMissingValue = "\\missing";
constexpr uint64_t kRolloutSeed = 0x726f6c6c6f7574ULL;

struct Binding {
  std::shared_ptr<const Policy> policy;
  std::vector<RuleState*> states;  // one per rule, same order
};

struct PlannedItem {
  PlannedItem(const Limit& l) : limit(l) {}  // NOLINT: Limit has no default
  std::string name;
  std::string identity;
  std::string key;
  Limit limit;
  int64_t cost = 0;
  RuleOutcome::ShadowReason shadow = RuleOutcome::ShadowReason::kNone;
  RuleState* state = nullptr;
  std::optional<RollbackConfig> rollback;
  size_t order = 0;  // position in policy order
};

struct Plan {
  std::shared_ptr<const Binding> binding;
  uint64_t generation = 0;
  bool explain = false;
  std::vector<PlannedItem> items;  // enforced first, then shadow
  size_t enforced_count = 0;
  std::vector<std::string> trace;
  // Results.
  std::vector<Decision> decisions;
  Status error;
  bool unenforced = false;
  bool allowed = false;
  int denied_item = -1;

  std::vector<AcquireItem> Batch(size_t count) const {
    std::vector<AcquireItem> batch;
    batch.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      batch.push_back({items[i].key, &items[i].limit, explain ? 0 : items[i].cost});
    }
    return batch;
  }
};

const char* ShadowText(RuleOutcome::ShadowReason r) {
  switch (r) {
    case RuleOutcome::ShadowReason::kConfigured:
      return " [shadow: mode]";
    case RuleOutcome::ShadowReason::kRollout:
      return " [shadow: outside enforce_percent]";
    case RuleOutcome::ShadowReason::kRollback:
      return " [shadow: rollback guard tripped]";
    default:
      return "";
  }
}

}  // namespace

class Enforcer::Impl {
 public:
  Impl(std::shared_ptr<PolicyStore> policies, Store* store, const Clock* clock,
       EnforcerOptions options, ClientIpResolver ip, std::unique_ptr<JwtVerifier> jwt)
      : policies_(std::move(policies)),
        store_(store),
        clock_(clock),
        options_(std::move(options)),
        ip_(std::move(ip)),
        jwt_(std::move(jwt)) {}

  std::shared_ptr<Plan> PlanRequest(const RequestView& request, bool explain);
  Result<std::shared_ptr<Plan>> PlanItems(std::span<const ExplicitItem> items);
  CheckOutcome Run(Plan& plan);
  void RunAsync(std::shared_ptr<Plan> plan, std::function<void(CheckOutcome)> done);
  std::vector<RuleCounters> Counters() const;
  bool ResetRollback(std::string_view rule);
  std::string ClientIp(const RequestView& request) const { return ip_.Resolve(request); }

  const std::shared_ptr<PolicyStore> policies_;
  Store* const store_;
  const Clock* const clock_;
  const EnforcerOptions options_;

 private:
  std::shared_ptr<const Binding> Bind(std::shared_ptr<const Policy> policy);
  RuleState* StateFor(const std::string& name);
  void AddItem(Plan& plan, std::vector<PlannedItem>& shadow, PlannedItem item);
  // Returns true when the enforced items must be decided again on their own.
  bool Absorb(Plan& plan, Result<BatchDecision> r, bool second);
  CheckOutcome Finish(Plan& plan);
  void Count(Plan& plan);
  void Log(const std::string& message) const;

  const ClientIpResolver ip_;
  const std::unique_ptr<JwtVerifier> jwt_;

  mutable std::mutex
      mu_;  // guards states_ (the map; entries are never erased) and binding rebuilds
  std::map<std::string, std::unique_ptr<RuleState>, std::less<>> states_;
  mutable std::mutex binding_mu_;  // guards binding_ (a TSan-visible pointer swap)
  std::shared_ptr<const Binding> binding_;
};

void Enforcer::Impl::Log(const std::string& message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::fprintf(stderr, "tollgate: %s\n", message.c_str());
  }
}

RuleState* Enforcer::Impl::StateFor(const std::string& name) {
  auto it = states_.find(name);
  if (it == states_.end()) it = states_.emplace(name, std::make_unique<RuleState>(name)).first;
  return it->second.get();
}

std::shared_ptr<const Binding> Enforcer::Impl::Bind(std::shared_ptr<const Policy> policy) {
  {
    std::lock_guard<std::mutex> lock(binding_mu_);
    if (binding_ && binding_->policy == policy) return binding_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto nb = std::make_shared<Binding>();
  nb->policy = policy;
  // Only the live policy updates fingerprints, so an in-flight decision on an
  // old policy cannot undo what a reload reset.
  const bool live = policies_->Current() == policy;
  for (const Rule& rule : policy->rules) {
    RuleState* s = StateFor(rule.name);
    if (live && s->fingerprint != rule.fingerprint) {
      if (!s->fingerprint.empty() && s->tripped.load()) {
        Log("rule '" + rule.name + "': changed by a reload, rollback guard reset");
        s->ResetGuard();
        s->reason.clear();
      }
      s->fingerprint = rule.fingerprint;
    }
    nb->states.push_back(s);
  }
  std::lock_guard<std::mutex> swap(binding_mu_);
  binding_ = nb;
  return nb;
}

void Enforcer::Impl::AddItem(Plan& plan, std::vector<PlannedItem>& shadow, PlannedItem item) {
  if (item.shadow == RuleOutcome::ShadowReason::kNone) {
    plan.items.push_back(std::move(item));
  } else {
    shadow.push_back(std::move(item));
  }
}

std::shared_ptr<Plan> Enforcer::Impl::PlanRequest(const RequestView& request, bool explain) {
  auto plan = std::make_shared<Plan>();
  plan->explain = explain;
  auto policy = policies_->Current(&plan->generation);
  plan->binding = Bind(policy);
  RequestContext ctx(request, ip_, *jwt_, clock_->WallNow() / 1'000'000'000);
  std::vector<PlannedItem> shadow;
  std::vector<int> group_taken(static_cast<size_t>(policy->group_count), -1);
  size_t order = 0;
  for (size_t i = 0; i < policy->rules.size(); ++i) {
    const Rule& rule = policy->rules[i];
    RuleState* state = plan->binding->states[i];
    int& taken = group_taken[static_cast<size_t>(policy->group_of[i])];
    if (taken >= 0) {
      if (explain) {
        plan->trace.push_back(rule.name + ": not applied (tier group already matched by '" +
                              policy->rules[static_cast<size_t>(taken)].name + "')");
      }
      continue;
    }
    const Condition* failed = nullptr;
    for (const Condition& c : rule.match) {
      if (!ctx.Matches(c)) {
        failed = &c;
        break;
      }
    }
    if (failed) {
      if (explain) {
        std::string why = rule.name + ": no match (" + failed->text + " failed)";
        if (failed->source.kind == Source::Kind::kJwt && !ctx.Claims().usable()) {
          why += "; jwt claims unusable: " + (ctx.Claims().state == JwtClaims::State::kNoToken
                                                  ? std::string("no token")
                                                  : ctx.Claims().error);
        }
        plan->trace.push_back(why);
      }
      continue;
    }
    taken = static_cast<int>(i);
    std::vector<std::string> values;
    const Source* missing = nullptr;
    for (const Source& s : rule.keys) {
      auto v = ctx.Value(s);
      if (!v) {
        if (!missing) missing = &s;
        values.emplace_back(kMissingValue);
      } else {
        values.push_back(NormalizeKeyValue(*v));
      }
    }
    if (missing) {
      if (!explain) state->missing_key.fetch_add(1, std::memory_order_relaxed);
      if (rule.missing_key == MissingKey::kSkip) {
        if (explain) {
          plan->trace.push_back(rule.name + ": skipped (key source " + missing->spec +
                                " absent; missing_key: skip)");
        }
        continue;
      }
    }
    PlannedItem item(rule.limit);
    item.name = rule.name;
    item.identity = JoinIdentity(values);
    item.key = BucketKey(rule.name, rule.limit.algorithm(), item.identity);
    item.state = state;
    item.rollback = rule.rollback;
    item.order = order++;
    switch (rule.cost_kind) {
      case Rule::CostKind::kFixed:
        item.cost = rule.fixed_cost;
        break;
      case Rule::CostKind::kHeader:
      case Rule::CostKind::kQuery: {
        std::optional<std::string> text;
        if (rule.cost_kind == Rule::CostKind::kHeader) {
          if (auto h = request.Header(rule.cost_arg)) text = std::string(*h);
        } else {
          text = request.QueryParam(rule.cost_arg);
        }
        if (!text || !ParseCost(*text, &item.cost)) item.cost = rule.default_cost;
        break;
      }
    }
    if (rule.shadow) {
      item.shadow = RuleOutcome::ShadowReason::kConfigured;
    } else if (state->tripped.load(std::memory_order_acquire)) {
      item.shadow = RuleOutcome::ShadowReason::kRollback;
    } else if (rule.enforce_percent < 100) {
      const uint64_t bucket = StableHash(rule.name + '\x1f' + item.identity, kRolloutSeed) % 10000;
      if (static_cast<double>(bucket) >= rule.enforce_percent * 100) {
        item.shadow = RuleOutcome::ShadowReason::kRollout;
      }
    }
    if (explain) {
      plan->trace.push_back(rule.name + ": applies, key " + item.identity + ", cost " +
                            std::to_string(item.cost) + ", " + rule.limit.ToString() +
                            ShadowText(item.shadow));
    }
    AddItem(*plan, shadow, std::move(item));
  }
  plan->enforced_count = plan->items.size();
  for (auto& s : shadow) plan->items.push_back(std::move(s));
  return plan;
}

Result<std::shared_ptr<Plan>> Enforcer::Impl::PlanItems(std::span<const ExplicitItem> items) {
  auto plan = std::make_shared<Plan>();
  auto policy = policies_->Current(&plan->generation);
  plan->binding = Bind(policy);
  std::vector<PlannedItem> shadow;
  size_t order = 0;
  for (size_t n = 0; n < items.size(); ++n) {
    const ExplicitItem& it = items[n];
    const std::string where = "items[" + std::to_string(n) + "]: ";
    if (it.cost < 0) return InvalidArgument(where + "cost must be >= 0");
    int index = -1;
    if (!it.rule.empty()) {
      index = policy->Find(it.rule);
      if (index < 0) return InvalidArgument(where + "unknown rule '" + std::string(it.rule) + "'");
    } else if (!it.limit_override) {
      if (policy->rules.size() != 1) {
        return InvalidArgument(where + "needs a rule name (the policy has " +
                               std::to_string(policy->rules.size()) + " rules) or a limit");
      }
      index = 0;
    }
    const Rule* rule = index >= 0 ? &policy->rules[static_cast<size_t>(index)] : nullptr;
    std::optional<Limit> limit;
    if (it.limit_override) {
      auto l = Limit::Create(*it.limit_override);
      if (!l.ok()) return InvalidArgument(where + "limit: " + l.status().message());
      limit = *l;
    } else {
      limit = rule->limit;
    }
    PlannedItem item(*limit);
    if (rule) {
      item.name = rule->name;
      item.state = plan->binding->states[static_cast<size_t>(index)];
      item.rollback = rule->rollback;
    } else {
      item.name = it.override_name.empty() ? "override" : std::string(it.override_name);
      std::lock_guard<std::mutex> lock(mu_);
      item.state = StateFor(item.name);
    }
    item.identity = NormalizeKeyValue(it.key);
    if (item.identity.empty()) item.identity = std::string(kMissingValue);
    item.key = BucketKey(item.name, limit->algorithm(), item.identity);
    item.cost = std::min<int64_t>(it.cost, kMaxCost);
    item.order = order++;
    if (rule && rule->shadow) {
      item.shadow = RuleOutcome::ShadowReason::kConfigured;
    } else if (item.state->tripped.load(std::memory_order_acquire)) {
      item.shadow = RuleOutcome::ShadowReason::kRollback;
    } else if (rule && rule->enforce_percent < 100) {
      const uint64_t bucket = StableHash(rule->name + '\x1f' + item.identity, kRolloutSeed) % 10000;
      if (static_cast<double>(bucket) >= rule->enforce_percent * 100) {
        item.shadow = RuleOutcome::ShadowReason::kRollout;
      }
    }
    AddItem(*plan, shadow, std::move(item));
  }
  plan->enforced_count = plan->items.size();
  for (auto& s : shadow) plan->items.push_back(std::move(s));
  return plan;
}

bool Enforcer::Impl::Absorb(Plan& plan, Result<BatchDecision> r, bool second) {
  if (!r.ok()) {
    plan.error = r.status();
    return false;
  }
  const size_t expected = second ? plan.enforced_count : plan.items.size();
  if (!r->enforced) {
    plan.unenforced = true;
    plan.allowed = r->allowed;
    if (r->decisions.size() == expected) {
      for (size_t i = 0; i < expected; ++i) plan.decisions[i] = r->decisions[i];
    }
    return false;
  }
  if (r->decisions.size() != expected) {
    plan.error = InternalError("store returned " + std::to_string(r->decisions.size()) +
                               " decisions for " + std::to_string(expected) + " items");
    return false;
  }
  for (size_t i = 0; i < expected; ++i) plan.decisions[i] = r->decisions[i];
  if (r->allowed) {
    plan.allowed = true;
    return false;
  }
  const size_t denied = static_cast<size_t>(std::max(0, r->denied_index));
  if (second || denied < plan.enforced_count) {
    plan.allowed = false;
    plan.denied_item = static_cast<int>(denied);
    return false;
  }
  // Only shadow items did not fit: never reject for them.
  if (plan.enforced_count == 0) {
    plan.allowed = true;
    return false;
  }
  return true;
}

CheckOutcome Enforcer::Impl::Run(Plan& plan) {
  plan.decisions.assign(plan.items.size(), Decision{});
  if (plan.items.empty()) {
    plan.allowed = true;
    return Finish(plan);
  }
  auto batch = plan.Batch(plan.items.size());
  if (Absorb(plan, store_->Acquire(batch), false)) {
    auto again = plan.Batch(plan.enforced_count);
    Absorb(plan, store_->Acquire(again), true);
  }
  return Finish(plan);
}

void Enforcer::Impl::RunAsync(std::shared_ptr<Plan> plan, std::function<void(CheckOutcome)> done) {
  plan->decisions.assign(plan->items.size(), Decision{});
  if (plan->items.empty()) {
    plan->allowed = true;
    done(Finish(*plan));
    return;
  }
  auto batch = plan->Batch(plan->items.size());
  store_->AcquireAsync(batch, [this, plan, done = std::move(done)](Result<BatchDecision> r) {
    if (!Absorb(*plan, std::move(r), false)) {
      done(Finish(*plan));
      return;
    }
    auto again = plan->Batch(plan->enforced_count);
    store_->AcquireAsync(again, [this, plan, done](Result<BatchDecision> r2) {
      Absorb(*plan, std::move(r2), true);
      done(Finish(*plan));
    });
  });
}

void Enforcer::Impl::Count(Plan& plan) {
  const int64_t now = clock_->Now();
  for (size_t i = 0; i < plan.items.size(); ++i) {
    PlannedItem& item = plan.items[i];
    RuleState& s = *item.state;
    const bool enforced = i < plan.enforced_count;
    if (!plan.error.ok()) {
      s.unavailable.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (plan.unenforced) {
      s.unenforced.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const bool fits = plan.decisions[i].allowed;
    if (!enforced) {
      if (!fits) s.shadow_rejected.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (plan.allowed) s.allowed.fetch_add(1, std::memory_order_relaxed);
    if (!plan.allowed && !fits) s.rejected.fetch_add(1, std::memory_order_relaxed);
    if (item.rollback && s.Record(*item.rollback, !plan.allowed && !fits, now)) {
      std::string reason;
      {
        std::lock_guard<std::mutex> lock(mu_);
        s.reason = "rejected " + std::to_string(s.window_rejected.load()) + " of " +
                   std::to_string(s.window_total.load()) + " decisions in the window (max ratio " +
                   std::to_string(item.rollback->max_reject_ratio) + ")";
        reason = s.reason;
      }
      Log("rule '" + s.name + "': rollback guard tripped, rule switched to shadow: " + reason);
    }
  }
}

CheckOutcome Enforcer::Impl::Finish(Plan& plan) {
  CheckOutcome out;
  out.policy_generation = plan.generation;
  out.trace = std::move(plan.trace);
  std::vector<size_t> by_order(plan.items.size());
  for (size_t i = 0; i < plan.items.size(); ++i) by_order[plan.items[i].order] = i;
  for (size_t i : by_order) {
    const PlannedItem& item = plan.items[i];
    RuleOutcome r;
    r.rule = item.name;
    r.key = item.identity;
    r.cost = item.cost;
    r.shadow = item.shadow != RuleOutcome::ShadowReason::kNone;
    r.shadow_reason = item.shadow;
    r.limit = item.limit;
    r.decision = plan.decisions[i];
    if (static_cast<int>(i) == plan.denied_item)
      out.denied_rule = static_cast<int>(out.rules.size());
    out.rules.push_back(std::move(r));
  }
  if (!plan.explain) Count(plan);

  if (plan.explain) {
    for (size_t i : by_order) {
      const PlannedItem& item = plan.items[i];
      const Decision& d = plan.decisions[i];
      const bool fits = item.cost <= d.remaining;
      out.trace.push_back(item.name + ": " + std::to_string(d.remaining) + " of " +
                          std::to_string(d.limit) + " left; cost " + std::to_string(item.cost) +
                          (fits ? " would be allowed" : " would be rejected") +
                          (item.shadow != RuleOutcome::ShadowReason::kNone ? " (shadow)" : ""));
      if (!fits && i < plan.enforced_count && out.verdict == CheckOutcome::Verdict::kAllow) {
        out.verdict = CheckOutcome::Verdict::kReject;
        out.http_status = 429;
      }
    }
    if (!plan.error.ok()) {
      out.verdict = CheckOutcome::Verdict::kUnavailable;
      out.http_status = 503;
      out.status = plan.error;
      out.trace.push_back("store error: " + plan.error.ToString());
    }
    return out;
  }

  const bool unavailable = !plan.error.ok() || (plan.unenforced && !plan.allowed);
  if (unavailable) {
    out.verdict = CheckOutcome::Verdict::kUnavailable;
    out.http_status = 503;
    out.enforced = plan.error.ok() ? false : true;
    out.status = plan.error.ok() ? UnavailableError("store answered without state (fail-closed)")
                                 : plan.error;
    out.body = ProblemJson(ProblemKind::kTemporaryReducedCapacity, options_.problem_type_base, {},
                           "rate-limit state is unavailable; try again later", 0);
    out.headers.push_back({"Cache-Control", "no-store"});
    out.headers.push_back({"Content-Type", "application/problem+json"});
    return out;
  }
  if (plan.unenforced) {
    out.enforced = false;
    return out;
  }

  std::vector<QuotaReport> reports;
  if (plan.allowed) {
    for (size_t i : by_order) {
      if (i >= plan.enforced_count) continue;
      const PlannedItem& item = plan.items[i];
      reports.push_back(MakeQuotaReport(item.name, item.limit, plan.decisions[i]));
      out.delay = std::max(out.delay, plan.decisions[i].delay);
    }
    out.headers = RenderRateLimitHeaders(options_.header_style, reports, clock_->WallNow());
    return out;
  }

  const PlannedItem& denied = plan.items[static_cast<size_t>(plan.denied_item)];
  const Decision& d = plan.decisions[static_cast<size_t>(plan.denied_item)];
  out.verdict = CheckOutcome::Verdict::kReject;
  out.http_status = 429;
  reports.push_back(MakeQuotaReport(denied.name, denied.limit, d));
  out.headers = RenderRateLimitHeaders(options_.header_style, reports, clock_->WallNow());
  std::string detail;
  if (d.retry_after == Decision::kNever) {
    detail = "the cost of this request (" + std::to_string(denied.cost) +
             ") exceeds the capacity of policy '" + denied.name + "' (" +
             std::to_string(denied.limit.burst()) + "); it can never be allowed";
  } else {
    out.retry_after_seconds = RetryAfterSeconds(d.retry_after, denied.key,
                                                options_.retry_after_jitter, options_.jitter_seed);
    out.headers.push_back({"Retry-After", std::to_string(out.retry_after_seconds)});
    detail = "rate limit of policy '" + denied.name + "' exceeded; retry after " +
             std::to_string(out.retry_after_seconds) + " s";
  }
  if (!options_.reason_header.empty()) {
    out.headers.push_back(
        {options_.reason_header, std::string(AlgorithmName(denied.limit.algorithm())) +
                                     "_exceeded; policy=" + SfString(denied.name)});
  }
  out.headers.push_back({"Cache-Control", "no-store"});
  out.headers.push_back({"Content-Type", "application/problem+json"});
  const std::string violated[] = {denied.name};
  out.body = ProblemJson(ProblemKind::kQuotaExceeded, options_.problem_type_base, violated, detail,
                         out.retry_after_seconds);
  return out;
}

std::vector<RuleCounters> Enforcer::Impl::Counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RuleCounters> out;
  for (const auto& [name, s] : states_) {
    RuleCounters c;
    c.rule = name;
    c.allowed = s->allowed.load(std::memory_order_relaxed);
    c.rejected = s->rejected.load(std::memory_order_relaxed);
    c.shadow_rejected = s->shadow_rejected.load(std::memory_order_relaxed);
    c.unenforced = s->unenforced.load(std::memory_order_relaxed);
    c.unavailable = s->unavailable.load(std::memory_order_relaxed);
    c.missing_key = s->missing_key.load(std::memory_order_relaxed);
    c.rolled_back = s->tripped.load(std::memory_order_acquire);
    if (c.rolled_back) c.rollback_reason = s->reason;
    out.push_back(std::move(c));
  }
  return out;
}

bool Enforcer::Impl::ResetRollback(std::string_view rule) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(rule);
  if (it == states_.end()) return false;
  it->second->ResetGuard();
  it->second->reason.clear();
  return true;
}

Result<std::unique_ptr<Enforcer>> Enforcer::Create(std::shared_ptr<PolicyStore> policies,
                                                   Store* store, const Clock* clock,
                                                   EnforcerOptions options) {
  if (!policies) return InvalidArgument("enforcer: no policy store");
  if (!store) return InvalidArgument("enforcer: no store");
  if (!clock) return InvalidArgument("enforcer: no clock");
  if (!(options.retry_after_jitter >= 0 && options.retry_after_jitter <= 10)) {
    return InvalidArgument("enforcer: retry_after_jitter must be between 0 and 10");
  }
  for (char c : options.reason_header) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return InvalidArgument("enforcer: reason_header is not a valid header name");
  }
  for (char c : options.problem_type_base) {
    if (c < 0x21 || c > 0x7e) {
      return InvalidArgument("enforcer: problem_type_base must be a URI without spaces");
    }
  }
  auto ip = ClientIpResolver::Create(options.trusted_proxies, options.forwarded_header);
  if (!ip.ok()) return ip.status();
  auto jwt = JwtVerifier::Create(options.jwt);
  if (!jwt.ok()) return jwt.status();
  auto impl = std::make_unique<Impl>(std::move(policies), store, clock, std::move(options),
                                     std::move(*ip), std::move(*jwt));
  return std::unique_ptr<Enforcer>(new Enforcer(std::move(impl)));
}

Enforcer::Enforcer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Enforcer::~Enforcer() = default;

CheckOutcome Enforcer::Check(const RequestView& request) {
  auto plan = impl_->PlanRequest(request, false);
  return impl_->Run(*plan);
}

void Enforcer::CheckAsync(const RequestView& request, std::function<void(CheckOutcome)> done) {
  impl_->RunAsync(impl_->PlanRequest(request, false), std::move(done));
}

CheckOutcome Enforcer::Explain(const RequestView& request) {
  auto plan = impl_->PlanRequest(request, true);
  return impl_->Run(*plan);
}

Result<CheckOutcome> Enforcer::CheckItems(std::span<const ExplicitItem> items) {
  auto plan = impl_->PlanItems(items);
  if (!plan.ok()) return plan.status();
  return impl_->Run(**plan);
}

std::string Enforcer::ClientIp(const RequestView& request) const {
  return impl_->ClientIp(request);
}

std::vector<RuleCounters> Enforcer::Counters() const { return impl_->Counters(); }

bool Enforcer::ResetRollback(std::string_view rule) { return impl_->ResetRollback(rule); }

const EnforcerOptions& Enforcer::options() const { return impl_->options_; }

PolicyStore& Enforcer::policies() const { return *impl_->policies_; }

}  // namespace tollgate
