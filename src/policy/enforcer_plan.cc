// Enforcer, planning half: which rules apply to a request (tiers, match),
// their keys (normalised, missing-key policy), costs, and shadow status
// (mode, rollback guard, enforce_percent rollout).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <span>

#include "policy/enforcer_impl.h"
#include "policy/request_context.h"
#include "policy/value_sets.h"

namespace tollgate {
namespace {

const char* ShadowText(RuleOutcome::ShadowReason r) {
  switch (r) {
    case RuleOutcome::ShadowReason::kConfigured:
      return " [shadow: mode]";
    case RuleOutcome::ShadowReason::kRollout:
      return " [shadow: outside enforce_percent]";
    case RuleOutcome::ShadowReason::kRollback:
      return " [shadow: rollback guard tripped]";
    case RuleOutcome::ShadowReason::kSoft:
      return " [soft: admitted and warned when over]";
    default:
      return "";
  }
}

}  // namespace

void Enforcer::Impl::Log(const std::string& message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::fprintf(stderr, "tollgate: %s\n", message.c_str());
  }
}

RuleState* Enforcer::Impl::StateFor(const std::string& name, FrontEnd* front_end) {
  auto& states = front_end != nullptr ? front_end->states : states_;
  auto it = states.find(name);
  if (it == states.end()) it = states.emplace(name, std::make_unique<RuleState>(name)).first;
  return it->second.get();
}

void Enforcer::Impl::SyncFingerprint(RuleState& s, const Rule& rule) {
  if (s.fingerprint != rule.fingerprint) {
    if (!s.fingerprint.empty() && s.tripped.load()) {
      Log("rule '" + rule.name + "': changed by a reload, rollback guard reset");
      s.ResetGuard();
      s.reason.clear();
      s.origin.clear();
    }
    s.fingerprint = rule.fingerprint;
  }
  s.rollback = rule.rollback;
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
    if (live) SyncFingerprint(*s, rule);
    nb->states.push_back(s);
  }
  std::lock_guard<std::mutex> swap(binding_mu_);
  binding_ = nb;
  return nb;
}

namespace {

std::atomic<uint64_t> g_next_enforcer_id{1};

// One thread's bindings (see BindOnThisThread), a few slots as SnapshotCache.
struct BindingCache {
  struct Slot {
    uint64_t enforcer = 0;  // Impl::id_, 0 = empty
    std::shared_ptr<const Binding> binding;
  };
  std::array<Slot, 4> slots;
  size_t next = 0;
};
thread_local BindingCache t_bindings;

}  // namespace

uint64_t Enforcer::Impl::NextId() { return g_next_enforcer_id.fetch_add(1); }

// A copy of the shared binding owned by this thread: a plan's reference to it
// changes a count no other thread writes (no cache line moves between workers
// per decision, issue 32), and Bind's locks are taken once per thread and policy.
const std::shared_ptr<const Binding>& Enforcer::Impl::BindOnThisThread(
    const std::shared_ptr<const Policy>& policy) {
  BindingCache& cache = t_bindings;
  BindingCache::Slot* mine = nullptr;
  for (BindingCache::Slot& slot : cache.slots) {
    if (slot.enforcer != id_) continue;
    if (slot.binding->policy == policy) return slot.binding;
    mine = &slot;
  }
  if (mine == nullptr) {
    mine = &cache.slots[cache.next];
    cache.next = (cache.next + 1) % cache.slots.size();
  }
  mine->binding = std::make_shared<const Binding>(*Bind(policy));
  mine->enforcer = id_;
  return mine->binding;
}

void PlanBuilder::Add(PlannedItem item) {
  if (item.lease || item.storeless != ExplicitItem::Storeless::kNo) {
    // An enforced deny-all item with a cost rejects: the store items are only peeked.
    if (item.storeless == ExplicitItem::Storeless::kDenyAll &&
        item.shadow == RuleOutcome::ShadowReason::kNone && item.cost > 0) {
      plan.peek = true;
    }
    storeless.push_back(std::move(item));
  } else if (item.shadow == RuleOutcome::ShadowReason::kNone) {
    plan.items.push_back(std::move(item));
  } else {
    shadow.push_back(std::move(item));
  }
}

void PlanBuilder::Seal() {
  plan.enforced_count = plan.items.size();
  for (auto& s : shadow) plan.items.push_back(std::move(s));
  plan.storeless_count = storeless.size();
  for (auto& s : storeless) plan.items.push_back(std::move(s));
}

PlannedItem NewItem(const Limit& limit, std::string name, RuleState* state, std::string identity,
                    std::string key, size_t order, const Rule* rule) {
  PlannedItem item(limit);
  item.name = std::move(name);
  item.identity = std::move(identity);
  item.key = std::move(key);
  item.state = state;
  item.order = order;
  if (rule != nullptr) {
    item.rollback = rule->rollback;
    item.failure_mode = rule->failure_mode_tag;
    item.header_styles = rule->header_styles;
    item.response = rule->response.get();
    if (rule->block_limit) {
      item.block_key = BlockKey(item.name, item.identity);
      item.block_limit = &*rule->block_limit;
    }
  }
  return item;
}

void MakeLeaseItem(PlannedItem& item, const LeaseLimit& lease) {
  item.lease = lease;
  item.key = LeaseKey(item.name, item.identity);
  item.cost = 1;
}

namespace {

// The first of `rule`'s match conditions that `ctx` fails, or null.
const Condition* FirstFailed(const Rule& rule, RequestContext& ctx) {
  for (const Condition& c : rule.match) {
    if (!ctx.Matches(c)) return &c;
  }
  return nullptr;
}

std::string NoMatchLine(const Rule& rule, const Condition& failed, RequestContext& ctx) {
  std::string why = rule.name + ": no match (" + failed.text + " failed)";
  if (failed.source.kind == Source::Kind::kJwt && !ctx.Claims().usable()) {
    why += "; jwt claims unusable: " + (ctx.Claims().state == JwtClaims::State::kNoToken
                                            ? std::string("no token")
                                            : ctx.Claims().error);
  }
  return why;
}

// The cost a request asks of a limit rule.
int64_t RequestCost(const Rule& rule, const RequestView& request) {
  int64_t cost = 0;
  switch (rule.cost_kind) {
    case Rule::CostKind::kFixed:
      return rule.fixed_cost;
    case Rule::CostKind::kHeader:
    case Rule::CostKind::kQuery: {
      std::optional<std::string> text;
      if (rule.cost_kind == Rule::CostKind::kHeader) {
        if (auto h = request.Header(rule.cost_arg)) text = std::string(*h);
      } else {
        text = request.QueryParam(rule.cost_arg);
      }
      if (!text || !ParseCost(*text, &cost)) cost = rule.default_cost;
      return cost;
    }
    case Rule::CostKind::kResponse:
    case Rule::CostKind::kHandler:
      return rule.cost_estimate;  // the rest is charged when the response ends
  }
  return cost;
}

}  // namespace

std::shared_ptr<Plan> Enforcer::Impl::PlanRequest(const RequestView& request, bool explain) {
  auto plan = std::make_shared<Plan>();
  plan->explain = explain;
  const PolicyStore::Snapshot& snapshot = policies_->SnapshotOnThisThread();
  plan->generation = snapshot.generation;
  plan->binding = BindOnThisThread(snapshot.policy);
  const Policy* policy = plan->binding->policy.get();
  RequestContext ctx(request, ip_, *jwt_, clock_->WallNow() / 1'000'000'000);
  PlanBuilder b(*plan);
  plan->items.reserve(policy->rules.size());
  // Which rule took each tier group: on the stack for a usual policy (issue 32).
  const size_t groups = static_cast<size_t>(policy->group_count);
  std::array<int, 32> inline_taken;
  std::vector<int> heap_taken;
  if (groups > inline_taken.size()) heap_taken.resize(groups);
  const std::span<int> group_taken = groups > inline_taken.size()
                                         ? std::span<int>(heap_taken)
                                         : std::span<int>(inline_taken.data(), groups);
  std::fill(group_taken.begin(), group_taken.end(), -1);
  for (size_t i = 0; i < policy->rules.size(); ++i) {
    const Rule& rule = policy->rules[i];
    int& taken = group_taken[static_cast<size_t>(policy->group_of[i])];
    if (taken >= 0) {
      if (explain) {
        plan->trace.push_back(rule.name + ": not applied (tier group already matched by '" +
                              policy->rules[static_cast<size_t>(taken)].name + "')");
      }
      continue;
    }
    if (const Condition* failed = FirstFailed(rule, ctx)) {
      if (explain) plan->trace.push_back(NoMatchLine(rule, *failed, ctx));
      continue;
    }
    taken = static_cast<int>(i);
    if (PlanMatched(b, rule, plan->binding->states[i], request, ctx)) {
      for (size_t j = i + 1; explain && j < policy->rules.size(); ++j) {
        plan->trace.push_back(policy->rules[j].name + ": not evaluated (" +
                              std::string(RuleActionName(rule.action)) + " rule '" + rule.name +
                              "' matched first)");
      }
      break;
    }
  }
  b.Seal();
  return plan;
}

bool Enforcer::Impl::PlanMatched(PlanBuilder& b, const Rule& rule, RuleState* state,
                                 const RequestView& request, RequestContext& ctx) {
  const bool explain = b.plan.explain;
  const Source* missing = nullptr;
  std::string identity;
  if (rule.keys.size() == 1) {
    // One key value is the identity itself: no list to join (issue 32).
    const std::optional<std::string> v = ctx.Value(rule.keys.front());
    if (!v) missing = &rule.keys.front();
    identity = IdentityPart(v);
  } else {
    std::vector<std::string> values;
    values.reserve(rule.keys.size());
    for (const Source& s : rule.keys) {
      const std::optional<std::string> v = ctx.Value(s);
      if (!v && !missing) missing = &s;
      values.push_back(IdentityPart(v));
    }
    identity = JoinIdentity(values);
  }
  if (rule.action != RuleAction::kLimit) {
    // allow, deny, unlimited: decided without the store; a missing key never skips them.
    return PlanAction(b, rule, state, std::move(identity));
  }
  if (missing) {
    if (!explain) state->missing_key.fetch_add(1, std::memory_order_relaxed);
    if (rule.missing_key == MissingKey::kSkip) {
      if (explain) {
        b.plan.trace.push_back(rule.name + ": skipped (key source " + missing->spec +
                               " absent; missing_key: skip)");
      }
      return false;
    }
  }
  const Limit* tenant = rule.tenants && !missing ? rule.tenants->Find(identity) : nullptr;
  std::string key = BucketKey(rule.name, rule.limit.algorithm(), identity);
  PlannedItem item = NewItem(tenant ? *tenant : rule.limit, rule.name, state, std::move(identity),
                             std::move(key), b.order++, &rule);
  item.rule = &rule;
  item.cost = RequestCost(rule, request);
  item.shadow = ShadowOf(rule, *state, item.identity);
  if (rule.lease) MakeLeaseItem(item, *rule.lease);
  if (explain) {
    b.plan.trace.push_back(rule.name + ": applies, key " + item.identity + ", cost " +
                           std::to_string(item.cost) + ", " +
                           (rule.lease ? rule.lease->ToString() : item.limit.ToString()) +
                           (tenant ? " (tenant limit)" : "") + ShadowText(item.shadow));
  }
  b.Add(std::move(item));
  return false;
}

bool Enforcer::Impl::PlanAction(PlanBuilder& b, const Rule& rule, RuleState* state,
                                std::string identity) {
  if (identity.empty()) identity = std::string(kMissingValue);
  std::string key = identity;  // never sent to a store
  PlannedItem item = NewItem(rule.limit, rule.name, state, std::move(identity), std::move(key),
                             b.order++, nullptr);
  item.response = rule.response.get();
  item.cost = 1;
  item.storeless = rule.action == RuleAction::kDeny ? ExplicitItem::Storeless::kDenyAll
                                                    : ExplicitItem::Storeless::kUnlimited;
  item.forbid = rule.action == RuleAction::kDeny;
  item.action = RuleActionName(rule.action);
  if (item.forbid) item.shadow = ShadowOf(rule, *state, item.identity);
  const bool enforced = item.shadow == RuleOutcome::ShadowReason::kNone;
  const bool stop = rule.action == RuleAction::kAllow || (item.forbid && enforced);
  if (b.plan.explain) {
    std::string line = rule.name + ": matches, key " + item.identity + ", action " +
                       std::string(RuleActionName(rule.action));
    switch (rule.action) {
      case RuleAction::kAllow:
        line += ": exempt, allowed without a limit; later rules not evaluated";
        break;
      case RuleAction::kDeny:
        line += enforced ? ": refused (403); later rules not evaluated"
                         : ": would refuse (403)" + std::string(ShadowText(item.shadow)) +
                               "; evaluation goes on";
        break;
      default:
        line += ": no limit; evaluation goes on";
        break;
    }
    b.plan.trace.push_back(std::move(line));
  }
  b.Add(std::move(item));
  return stop;
}

RuleOutcome::ShadowReason Enforcer::Impl::ShadowOf(const Rule& rule, const RuleState& state,
                                                   const std::string& identity) const {
  if (rule.soft) return RuleOutcome::ShadowReason::kSoft;
  if (rule.shadow) return RuleOutcome::ShadowReason::kConfigured;
  if (state.tripped.load(std::memory_order_acquire)) return RuleOutcome::ShadowReason::kRollback;
  if (rule.enforce_percent < 100) {
    const uint64_t bucket = StableHash(rule.name + '\x1f' + identity, kRolloutSeed) % 10000;
    if (static_cast<double>(bucket) >= rule.enforce_percent * 100) {
      return RuleOutcome::ShadowReason::kRollout;
    }
  }
  return RuleOutcome::ShadowReason::kNone;
}

namespace {

// The policy index of the rule an explicit item names (-1: none).
Result<int> RuleIndexOf(const Policy& policy, const ExplicitItem& it, const std::string& where) {
  if (!it.rule.empty()) {
    const int index = policy.Find(it.rule);
    if (index < 0) return InvalidArgument(where + "unknown rule '" + std::string(it.rule) + "'");
    return index;
  }
  if (!it.limit_override && !it.limit && it.storeless == ExplicitItem::Storeless::kNo) {
    if (policy.rules.size() != 1) {
      return InvalidArgument(where + "needs a rule name (the policy has " +
                             std::to_string(policy.rules.size()) + " rules) or a limit");
    }
    return 0;
  }
  return -1;
}

// An explicit item's identity; `missing`: a source absent, so the tenant
// table is not consulted (as for requests).
Result<std::string> ItemIdentity(const ExplicitItem& it, const Rule* rule, const std::string& where,
                                 bool* missing) {
  if (!it.values.empty()) {
    if (rule == nullptr || it.rule.empty()) {
      return InvalidArgument(where + "values need a rule name (they are its limit_keys values)");
    }
    if (!it.key.empty()) return InvalidArgument(where + "key or values, not both");
    Result<std::string> joined = IdentityOfValues(*rule, it.values, missing);
    if (!joined.ok()) return InvalidArgument(where + joined.status().message());
    return joined;
  }
  if (rule != nullptr && rule->action == RuleAction::kLimit && rule->keys.size() > 1) {
    // One string names no bucket of a rule keyed on several values: a
    // request's identity joins them (JoinIdentity), a key would be escaped.
    std::string specs;
    for (const Source& s : rule->keys) specs += (specs.empty() ? "" : ", ") + s.spec;
    return InvalidArgument(where + "key: rule '" + rule->name + "' keys on " +
                           std::to_string(rule->keys.size()) + " values (" + specs +
                           "): name them with values");
  }
  return NormalizeKeyValue(it.key);
}

// The limit an explicit item is decided by.
Result<Limit> ItemLimit(const ExplicitItem& it, const Rule* rule, ExplicitItem::Storeless kind,
                        const std::string& identity, bool missing, const std::string& where) {
  if (kind != ExplicitItem::Storeless::kNo) return PlaceholderLimit();
  if (it.limit) return *it.limit;
  if (it.limit_override) {
    auto l = Limit::Create(*it.limit_override);
    if (!l.ok()) return InvalidArgument(where + "limit: " + l.status().message());
    return *l;
  }
  if (const Limit* tenant = rule->tenants && !missing ? rule->tenants->Find(identity) : nullptr) {
    return *tenant;  // the same limit a request with this key gets
  }
  return rule->limit;
}

}  // namespace

Result<PlannedItem> Enforcer::Impl::PlanExplicit(const Policy& policy, const Binding& binding,
                                                 const ExplicitItem& it, const std::string& where,
                                                 size_t order, FrontEnd* front_end) {
  if (it.cost < 0) return InvalidArgument(where + "cost must be >= 0");
  Result<int> index = RuleIndexOf(policy, it, where);
  if (!index.ok()) return index.status();
  const Rule* rule = *index >= 0 ? &policy.rules[static_cast<size_t>(*index)] : nullptr;
  bool missing = false;
  Result<std::string> identity = ItemIdentity(it, rule, where, &missing);
  if (!identity.ok()) return identity.status();
  // A rule without a limit (allow, deny, unlimited) is decided as a
  // request would be: without the store, whatever the item's limit says.
  ExplicitItem::Storeless kind = it.storeless;
  if (rule && rule->action != RuleAction::kLimit) {
    kind = rule->action == RuleAction::kDeny ? ExplicitItem::Storeless::kDenyAll
                                             : ExplicitItem::Storeless::kUnlimited;
  }
  Result<Limit> limit = ItemLimit(it, rule, kind, *identity, missing, where);
  if (!limit.ok()) return limit.status();
  std::string name = rule                       ? rule->name
                     : it.override_name.empty() ? std::string("override")
                                                : std::string(it.override_name);
  RuleState* state = rule                ? binding.states[static_cast<size_t>(*index)]
                     : it.handle.valid() ? it.handle.state()
                                         : HandleFor(name, front_end);
  std::string id = identity->empty() ? std::string(kMissingValue) : std::move(*identity);
  std::string key =
      it.bucket_key.empty() ? BucketKey(name, limit->algorithm(), id) : std::string(it.bucket_key);
  PlannedItem item =
      NewItem(*limit, std::move(name), state, std::move(id), std::move(key), order, rule);
  item.cost = std::min<int64_t>(it.cost, kMaxCost);
  item.storeless = kind;
  item.forbid = rule && rule->action == RuleAction::kDeny;
  if (rule) {
    item.action = RuleActionName(rule->action);
  } else if (kind != ExplicitItem::Storeless::kNo) {
    item.action = kind == ExplicitItem::Storeless::kDenyAll ? "deny" : "unlimited";
  }
  item.report_name = std::string(it.report_name);
  item.quota = it.quota && kind == ExplicitItem::Storeless::kNo;
  item.settle_charge =
      kind == ExplicitItem::Storeless::kNo ? std::clamp<int64_t>(it.settle_charge, 0, kMaxCost) : 0;
  if (it.shadow || it.quota) {
    item.shadow = RuleOutcome::ShadowReason::kConfigured;
  } else if (rule) {
    item.shadow = ShadowOf(*rule, *item.state, item.identity);
  } else if (item.state->tripped.load(std::memory_order_acquire)) {
    item.shadow = RuleOutcome::ShadowReason::kRollback;
  }
  if (rule && rule->lease && kind == ExplicitItem::Storeless::kNo && !it.limit &&
      !it.limit_override) {
    MakeLeaseItem(item, *rule->lease);
  }
  return item;
}

Result<std::shared_ptr<Plan>> Enforcer::Impl::PlanItems(std::span<const ExplicitItem> items,
                                                        FrontEnd* front_end) {
  auto plan = std::make_shared<Plan>();
  plan->front_end = front_end;
  const PolicyStore::Snapshot& snapshot = policies_->SnapshotOnThisThread();
  plan->generation = snapshot.generation;
  plan->binding = BindOnThisThread(snapshot.policy);
  const Policy* policy = plan->binding->policy.get();
  PlanBuilder b(*plan);
  for (size_t n = 0; n < items.size(); ++n) {
    const std::string where = "items[" + std::to_string(n) + "]: ";
    Result<PlannedItem> item =
        PlanExplicit(*policy, *plan->binding, items[n], where, b.order++, front_end);
    if (!item.ok()) return item.status();
    b.Add(std::move(*item));
  }
  b.Seal();
  return plan;
}

}  // namespace tollgate
