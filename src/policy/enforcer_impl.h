// Enforcer internals shared by its two halves: planning (enforcer_plan.cc:
// request -> rules -> items) and deciding (enforcer.cc: items -> store batch ->
// CheckOutcome). Private to src/policy.
//
// Thread safety: Impl is shared by all threads using an Enforcer; a Plan
// belongs to one decision (shared with a store callback for async checks).
#ifndef TOLLGATE_SRC_POLICY_ENFORCER_IMPL_H_
#define TOLLGATE_SRC_POLICY_ENFORCER_IMPL_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "policy/client_ip.h"
#include "policy/jwt.h"
#include "policy/policy_impl.h"
#include "policy/rule_state.h"
#include "tollgate/policy.h"

namespace tollgate {

// Identity value standing for an absent key source (missing_key: shared). A
// normalised value never holds a backslash followed by 'm', so no request can
// name this bucket.
inline constexpr std::string_view kMissingValue = "\\missing";
inline constexpr uint64_t kRolloutSeed = 0x726f6c6c6f7574ULL;

struct Binding {
  std::shared_ptr<const Policy> policy;
  std::vector<RuleState*> states;  // one per rule, same order
};

// Per-decision scratch (item order, header reports) lives on the stack up to
// this many items, on the heap beyond (issue 32).
inline constexpr size_t kInlineItems = 8;

struct PlannedItem {
  PlannedItem(const Limit& l) : limit(l) {}  // NOLINT: Limit has no default
  std::string name;
  std::string identity;
  std::string key;
  Limit limit;
  int64_t cost = 0;
  // Explicit items only (ExplicitItem): decided without the store, and the
  // name for headers and the problem body when it differs from `name`.
  ExplicitItem::Storeless storeless = ExplicitItem::Storeless::kNo;
  std::string report_name;
  bool forbid = false;                // a deny rule's item: refused with 403, not 429
  std::string_view action = "limit";  // RuleOutcome::action
  const std::string& ReportName() const { return report_name.empty() ? name : report_name; }

  RuleOutcome::ShadowReason shadow = RuleOutcome::ShadowReason::kNone;
  bool quota = false;         // ExplicitItem::quota (then shadow is kConfigured)
  int64_t settle_charge = 0;  // ExplicitItem::settle_charge
  RuleState* state = nullptr;
  // The policy rule (kept alive by the plan's binding); null for explicit items.
  const Rule* rule = nullptr;
  std::optional<RollbackConfig> rollback;
  size_t order = 0;                         // position in policy order
  std::optional<FailureMode> failure_mode;  // the rule's, as the store item's tag
  // Concurrency rules: decided by AcquireLease before the batch (kept with
  // the storeless items, never in the batch); the id while it is held.
  std::optional<LeaseLimit> lease;
  std::string lease_id;
  uint8_t header_styles = kInheritStyles;  // the rule's own styles (Rule::header_styles)
  // The rule's own answer to a refusal (Rule::response, kept alive by the
  // plan's binding); null: the defaults.
  const RuleResponse* response = nullptr;
  // A rule with block_for: its penalty box's store key (BlockKey) and limit
  // (Rule::block_limit, kept alive by the plan's binding); empty / null otherwise.
  std::string block_key;
  const Limit* block_limit = nullptr;
  // What the lease call asks the store for: the lease limit tagged with the
  // rule's failure mode, as a batch item is (AcquireItem::failure_mode).
  LeaseLimit LeaseCall() const { return lease->WithFailureMode(failure_mode); }
};

// The store key of a concurrency rule's leases for `identity`.
inline std::string LeaseKey(std::string_view rule, std::string_view identity) {
  std::string key;
  key.reserve(rule.size() + identity.size() + 13);
  key.append(rule)
      .append(
          "\x1f"
          "concurrency"
          "\x1f")
      .append(identity);
  return key;
}

// Enforcer::FrontEnd: a front end's response options and its ad-hoc rules'
// states (the map guarded by Impl::mu_; entries are never erased).
class Enforcer::FrontEnd {
 public:
  explicit FrontEnd(ResponseOptions r) : response(std::move(r)) {}
  const ResponseOptions response;
  std::map<std::string, std::unique_ptr<RuleState>, std::less<>> states;
};

struct Plan {
  std::shared_ptr<const Binding> binding;
  // The front end whose response options render the answer; null: the Enforcer's own.
  const Enforcer::FrontEnd* front_end = nullptr;
  uint64_t generation = 0;
  bool explain = false;
  int64_t started_ns = 0;          // clock_->Now() when the store was asked (decision latency)
  std::vector<PlannedItem> items;  // enforced first, then shadow, then storeless
  size_t enforced_count = 0;
  size_t storeless_count = 0;  // items decided without the store (at the end)
  bool peek = false;           // an enforced deny-all item rejects: store items cost 0
  std::vector<std::string> trace;
  // Results.
  std::vector<Decision> decisions;
  Status error;
  bool unenforced = false;
  bool allowed = false;
  int denied_item = -1;
  int64_t store_start_ns = 0;  // EnforcerOptions::time_store_calls: around the store calls
  int64_t store_end_ns = 0;
  bool lease_denied = false;  // an enforced concurrency rule had no free slot
  // Penalty boxes (enforcer_block.cc): the enforced store items whose box was
  // peeked before the batch, the first found closed (its key is refused; the
  // batch is then a peek) and how long it stays closed.
  std::vector<size_t> block_items;
  int blocked_item = -1;
  Nanos blocked_for{0};
  bool closed_denied = false;   // the denying item's box was closed (or found closed) after it
  std::vector<HeldLease> held;  // leases kept for an allowed outcome

  // The second round's items (Absorb): the enforced ones and the quota items
  // that fitted the first round, by index into `items`.
  std::vector<size_t> again;

  std::vector<AcquireItem> Batch(size_t count) const {
    std::vector<AcquireItem> batch;
    batch.reserve(count);
    for (size_t i = 0; i < count; ++i) batch.push_back(Call(i));
    return batch;
  }
  std::vector<AcquireItem> BatchAgain() const {
    std::vector<AcquireItem> batch;
    batch.reserve(again.size());
    for (size_t i : again) batch.push_back(Call(i));
    return batch;
  }
  AcquireItem Call(size_t i) const {
    return {items[i].key, &items[i].limit, explain || peek ? 0 : items[i].cost,
            items[i].failure_mode};
  }
  size_t StoreCount() const { return items.size() - storeless_count; }
  bool HasLeases() const {
    for (size_t i = StoreCount(); i < items.size(); ++i) {
      if (items[i].lease) return true;
    }
    return false;
  }
  bool Enforced(size_t i) const {
    return i < enforced_count ||
           (i >= StoreCount() && items[i].shadow == RuleOutcome::ShadowReason::kNone);
  }
};

// Collects a plan's items in the order the decision needs them (enforced
// store items, shadow store items, then those decided without the store) and
// numbers them in policy order: the ending both planners share.
struct PlanBuilder {
  explicit PlanBuilder(Plan& p) : plan(p) {}
  // Routes `item` to its group; an enforced deny-all item with a cost makes
  // the plan a peek.
  void Add(PlannedItem item);
  // Appends the groups to plan.items and sets their counts.
  void Seal();

  Plan& plan;
  std::vector<PlannedItem> shadow, storeless;
  size_t order = 0;
};

// The part of an item every planner sets: its limit, name, identity, store
// key, rule state and position; with `rule`, that rule's rollback config,
// failure mode and header styles.
PlannedItem NewItem(const Limit& limit, std::string name, RuleState* state, std::string identity,
                    std::string key, size_t order, const Rule* rule);
// Makes `item` a concurrency rule's lease (one slot, keyed by LeaseKey).
void MakeLeaseItem(PlannedItem& item, const LeaseLimit& lease);

class RequestContext;

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
  Result<std::shared_ptr<Plan>> PlanItems(std::span<const ExplicitItem> items, FrontEnd* front_end);
  CheckOutcome Run(Plan& plan);
  // Decisions of the storeless items, after the store's answer.
  void DecideStoreless(Plan& plan);
  void RunAsync(std::shared_ptr<Plan> plan, std::function<void(CheckOutcome)> done);
  // Concurrency rules: takes the leases before the batch (a denial makes the
  // batch a peek, so nothing is charged), then keeps them for an allowed
  // outcome or gives them back (AcquireLeasesAsync: the same one store call
  // at a time, then `next`). Releases never block.
  void AcquireLeases(Plan& plan);
  void AcquireLeasesAsync(std::shared_ptr<Plan> plan, size_t i, std::function<void()> next);
  // RunAsync after the penalty boxes were peeked: the leases, then the batch.
  void LeasesThenBatchAsync(std::shared_ptr<Plan> plan, std::function<void(CheckOutcome)> done);
  void RunBatchAsync(std::shared_ptr<Plan> plan, std::function<void(CheckOutcome)> done);
  // After the batch's answer: the steps Run takes after the store call, the
  // penalty boxes' closing without blocking, then `done`.
  void FinishAsync(std::shared_ptr<Plan> plan, std::function<void(CheckOutcome)> done);
  bool NeedsLease(Plan& plan, size_t i);
  void AbsorbLease(Plan& plan, size_t i, Result<LeaseDecision> r);
  void SettleLeases(Plan& plan);
  // Penalty boxes (enforcer_block.cc). CheckBlocks peeks the boxes of the
  // plan's enforced block_for items before the batch (one store call; none
  // when there are none); ApplyBlock, after the batch, refuses the plan when a
  // box was closed; StartBlocks closes the box of every enforced block_for
  // item that did not fit a refused batch (one store call, a box already
  // closed stays as it is). The async forms call `next` once when done.
  void CheckBlocks(Plan& plan);
  void CheckBlocksAsync(std::shared_ptr<Plan> plan, std::function<void()> next);
  void ApplyBlock(Plan& plan) const;
  void StartBlocks(Plan& plan);
  void StartBlocksAsync(std::shared_ptr<Plan> plan, std::function<void()> next);
  Status Release(std::span<const HeldLease> leases);
  void ReleaseAsync(std::vector<HeldLease> leases, std::function<void(int64_t)> done = nullptr);
  RuleState* LeaseState(std::string_view rule);
  std::vector<RuleCounters> Counters(const FrontEnd* front_end) const;
  FrontEnd* AddFrontEnd(ResponseOptions response) {
    std::lock_guard<std::mutex> lock(mu_);
    front_ends_.push_back(std::make_unique<FrontEnd>(std::move(response)));
    return front_ends_.back().get();
  }
  bool ResetRollback(std::string_view rule);
  bool TripRollback(std::string_view rule, std::string_view reason);
  bool AdoptRollback(const RollbackTransition& change);
  uint64_t RollbackFingerprint(std::string_view rule) const;
  void RecordUpstream(const CheckOutcome& outcome, int status, Nanos latency);
  std::string ClientIp(const RequestView& request) const { return ip_.Resolve(request); }
  // The state of an ad-hoc rule in `front_end`'s table (null: the
  // Enforcer's own), under mu_ (Enforcer::HandleFor).
  RuleState* HandleFor(const std::string& name, FrontEnd* front_end) {
    std::lock_guard<std::mutex> lock(mu_);
    return StateFor(name, front_end);
  }

  const std::shared_ptr<PolicyStore> policies_;
  Store* const store_;
  const Clock* const clock_;
  const EnforcerOptions options_;

 private:
  std::shared_ptr<const Binding> Bind(std::shared_ptr<const Policy> policy);
  // Bind's result as this thread's own copy, cached per thread (enforcer_plan.cc);
  // valid until this thread binds again for this Enforcer.
  const std::shared_ptr<const Binding>& BindOnThisThread(
      const std::shared_ptr<const Policy>& policy);
  static uint64_t NextId();
  RuleState* StateFor(const std::string& name, FrontEnd* front_end = nullptr);
  // The item of a rule whose conditions `ctx` met; returns true when
  // evaluation stops there (allow, an enforced deny).
  bool PlanMatched(PlanBuilder& b, const Rule& rule, RuleState* state, const RequestView& request,
                   RequestContext& ctx);
  // The storeless item of an allow, deny or unlimited rule that matched;
  // returns true when evaluation stops there (allow, an enforced deny).
  bool PlanAction(PlanBuilder& b, const Rule& rule, RuleState* state, std::string identity);
  // The item of one ExplicitItem at `order`, or kInvalidArgument prefixed by `where`.
  Result<PlannedItem> PlanExplicit(const Policy& policy, const Binding& binding,
                                   const ExplicitItem& it, const std::string& where, size_t order,
                                   FrontEnd* front_end);
  // Why a rule's item is decided in shadow mode (mode, rollback guard, rollout), or kNone.
  RuleOutcome::ShadowReason ShadowOf(const Rule& rule, const RuleState& state,
                                     const std::string& identity) const;
  // Returns true when the enforced items must be decided again on their own.
  bool Absorb(Plan& plan, Result<BatchDecision> r, bool second);
  // The CheckOutcome of a decided (or explained) plan, in named steps.
  CheckOutcome Finish(Plan& plan);
  void CollectRules(const Plan& plan, std::span<const size_t> by_order, CheckOutcome& out) const;
  void ExplainVerdict(const Plan& plan, std::span<const size_t> by_order, CheckOutcome& out) const;
  void FinishUnavailable(const Plan& plan, CheckOutcome& out) const;
  void FinishAllowed(const Plan& plan, std::span<const size_t> by_order, CheckOutcome& out) const;
  void FinishRejected(const Plan& plan, CheckOutcome& out) const;
  // How `plan`'s answer is rendered: its front end's options, else the Enforcer's.
  const ResponseOptions& ResponseOf(const Plan& plan) const {
    return plan.front_end != nullptr ? plan.front_end->response : options_;
  }
  // The rate-limit headers of `reports`; `styles` (one per report) when some
  // rule has styles of its own, empty for the server-wide ones.
  std::vector<HeaderField> RenderHeaders(const ResponseOptions& response,
                                         std::span<const QuotaReport> reports,
                                         std::span<const uint8_t> styles) const;
  void StoreCallStarted(Plan& plan) const {
    if (options_.time_store_calls) plan.store_start_ns = clock_->Now();
  }
  void StoreCallEnded(Plan& plan) const {
    if (options_.time_store_calls) plan.store_end_ns = clock_->Now();
  }
  void Count(Plan& plan);
  // Logs a trip of `s` by `trigger` and keeps the reason (takes mu_).
  void NoteTrip(RuleState& s, RollbackTrigger trigger, const RollbackConfig& config);
  // Reports a change this Enforcer made to options_.on_rollback (not for a
  // rule outside the current policy: fingerprint 0). No lock held.
  void Announce(const RollbackTransition& change) const;
  // Keeps `s` on the live definition of `rule`: a changed rule's tripped
  // guard is reset (logged). mu_ is held.
  void SyncFingerprint(RuleState& s, const Rule& rule);
  // The settlement of an allowed plan's enforced charges (settle.cc), or null.
  std::shared_ptr<Settlement> MakeSettlement(const Plan& plan) const;
  void Log(const std::string& message) const;

  const ClientIpResolver ip_;
  const std::unique_ptr<JwtVerifier> jwt_;

  mutable std::mutex
      mu_;  // guards states_ (the map; entries are never erased) and binding rebuilds
  std::map<std::string, std::unique_ptr<RuleState>, std::less<>> states_;
  std::vector<std::unique_ptr<FrontEnd>> front_ends_;  // guarded by mu_ (never erased)
  mutable std::mutex binding_mu_;  // guards binding_ (a TSan-visible pointer swap)
  std::shared_ptr<const Binding> binding_;
  const uint64_t id_ = NextId();  // unique in the process: keys the per-thread binding caches
};

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_ENFORCER_IMPL_H_
