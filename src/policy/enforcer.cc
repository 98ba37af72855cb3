// Enforcer, deciding half: one all-or-nothing store batch per request, then
// CheckOutcome with headers and body; counters; the public API.
//
// Batch layout: enforced items first, then shadow items. If only a shadow item
// did not fit, the enforced items are decided again on their own (a shadow
// rule must never reject), with the quota items that fitted (ExplicitItem::
// quota), which is the only case needing a second round trip; when every
// quota item with a cost was over, the call is rejected instead.
#include <algorithm>
#include <array>
#include <atomic>
#include <utility>

#include "policy/enforcer_impl.h"
#include "tollgate/period.h"
#include "tollgate/policy_headers.h"

namespace tollgate {
namespace {
constexpr Nanos kLeaseRetryCap{1'000'000'000};
}  // namespace

bool Enforcer::Impl::Absorb(Plan& plan, Result<BatchDecision> r, bool second) {
  if (!r.ok()) {
    plan.error = r.status();
    return false;
  }
  const size_t expected = second ? plan.again.size() : plan.StoreCount();
  // The batch's k-th item is the plan's item ItemOf(k).
  auto item_of = [&](size_t k) { return second ? plan.again[k] : k; };
  if (!r->enforced) {
    plan.unenforced = true;
    plan.allowed = r->allowed;
    if (r->decisions.size() == expected) {
      for (size_t k = 0; k < expected; ++k) plan.decisions[item_of(k)] = r->decisions[k];
    }
    return false;
  }
  if (r->decisions.size() != expected) {
    plan.error = InternalError("store returned " + std::to_string(r->decisions.size()) +
                               " decisions for " + std::to_string(expected) + " items");
    return false;
  }
  for (size_t k = 0; k < expected; ++k) plan.decisions[item_of(k)] = r->decisions[k];
  if (r->allowed) {
    plan.allowed = true;
    return false;
  }
  const size_t denied = item_of(static_cast<size_t>(std::max(0, r->denied_index)));
  if (second || denied < plan.enforced_count) {
    plan.allowed = false;
    plan.denied_item = static_cast<int>(denied);
    return false;
  }
  // Only shadow or quota items did not fit: never reject for a shadow item,
  // nor for some quota items; when every quota item with a cost is over
  // (envoyproxy/ratelimit's quota mode), reject, charging nothing.
  size_t quota_items = 0;
  size_t quota_over = 0;
  int first_over = -1;
  plan.again.clear();
  for (size_t i = 0; i < plan.StoreCount(); ++i) {
    const PlannedItem& item = plan.items[i];
    if (i < plan.enforced_count) {
      plan.again.push_back(i);
      continue;
    }
    if (!item.quota) continue;
    ++quota_items;
    if (item.cost == 0) continue;  // a peek fits, and has nothing to charge
    if (plan.decisions[i].allowed) {
      plan.again.push_back(i);
    } else {
      ++quota_over;
      if (first_over < 0) first_over = static_cast<int>(i);
    }
  }
  if (quota_items > 0 && quota_over == quota_items) {
    plan.allowed = false;
    plan.denied_item = first_over;
    return false;
  }
  if (plan.again.empty()) {
    plan.allowed = true;
    return false;
  }
  return true;
}

void Enforcer::Impl::DecideStoreless(Plan& plan) {
  for (size_t i = plan.StoreCount(); i < plan.items.size(); ++i) {
    const PlannedItem& item = plan.items[i];
    Decision& d = plan.decisions[i];
    if (item.lease) continue;  // decided by AcquireLeases
    if (item.storeless == ExplicitItem::Storeless::kUnlimited) {
      d.allowed = true;
      d.limit = d.remaining = INT64_MAX;
      continue;
    }
    d.allowed = item.cost == 0;
    d.retry_after = d.allowed ? Nanos(0) : Decision::kNever;
    // A deny-all rule rejects without the store, whatever the store answered.
    if (!d.allowed && plan.Enforced(i) && plan.error.ok()) {
      plan.allowed = false;
      plan.unenforced = false;
      if (plan.denied_item < 0) plan.denied_item = static_cast<int>(i);
    }
  }
}

// Whether item i needs a lease from the store (false: decided already, or
// nothing more to take). Sets plan.error when this front end cannot release.
bool Enforcer::Impl::NeedsLease(Plan& plan, size_t i) {
  PlannedItem& item = plan.items[i];
  if (!item.lease || !plan.error.ok()) return false;
  Decision& d = plan.decisions[i];
  d.limit = item.lease->max_in_flight();
  if (plan.explain) {
    // Explain charges nothing, and a lease cannot be peeked: report the rule only.
    d.allowed = true;
    d.remaining = d.limit;
    plan.trace.push_back(item.name + ": concurrency leases are not peeked by explain");
    return false;
  }
  if (!options_.releases_leases) {
    plan.error = UnavailableError("rule '" + item.name +
                                  "' limits concurrency, and this front end does not release "
                                  "leases");
    return false;
  }
  return !plan.lease_denied && plan.blocked_item < 0;  // rejected already: take no more slots
}

void Enforcer::Impl::AbsorbLease(Plan& plan, size_t i, Result<LeaseDecision> r) {
  PlannedItem& item = plan.items[i];
  if (!r.ok()) {
    plan.error = r.status();
    return;
  }
  Decision& d = plan.decisions[i];
  d.allowed = r->allowed;
  d.remaining = r->remaining;
  d.retry_after = std::min<Nanos>(r->retry_after, kLeaseRetryCap);
  // Denied: a slot usually frees when a request ends, long before the soonest
  // lease expires (retry_after, an upper bound), so the reset is at most 1 s,
  // as the Retry-After (Finish).
  d.reset_after = r->allowed ? r->expires_in : std::min<Nanos>(r->retry_after, kLeaseRetryCap);
  if (!r->enforced) plan.unenforced = true;
  if (r->allowed) {
    item.lease_id = std::move(r->lease_id);
    if (!item.lease_id.empty()) item.state->leases_acquired.fetch_add(1, std::memory_order_relaxed);
  } else if (plan.Enforced(i)) {
    plan.lease_denied = true;
    plan.peek = true;  // the batch then charges nothing
  }
}

void Enforcer::Impl::AcquireLeases(Plan& plan) {
  for (size_t i = plan.StoreCount(); i < plan.items.size() && plan.error.ok(); ++i) {
    if (NeedsLease(plan, i))
      AbsorbLease(plan, i, store_->AcquireLease(plan.items[i].key, plan.items[i].LeaseCall()));
  }
  if (!plan.error.ok()) SettleLeases(plan);
}

void Enforcer::Impl::AcquireLeasesAsync(std::shared_ptr<Plan> plan, size_t i,
                                        std::function<void()> next) {
  while (i < plan->items.size() && plan->error.ok() && !NeedsLease(*plan, i)) ++i;
  if (i >= plan->items.size() || !plan->error.ok()) {
    if (!plan->error.ok()) SettleLeases(*plan);
    next();
    return;
  }
  const PlannedItem& item = plan->items[i];
  store_->AcquireLeaseAsync(item.key, item.LeaseCall(),
                            [this, plan, i, next = std::move(next)](Result<LeaseDecision> r) {
                              AbsorbLease(*plan, i, std::move(r));
                              AcquireLeasesAsync(plan, i + 1, std::move(next));
                            });
}

void Enforcer::Impl::SettleLeases(Plan& plan) {
  if (plan.lease_denied && plan.error.ok()) {
    for (size_t i = plan.StoreCount(); i < plan.items.size(); ++i) {
      if (plan.items[i].lease && !plan.decisions[i].allowed && plan.Enforced(i)) {
        plan.allowed = false;
        plan.unenforced = false;
        if (plan.denied_item < 0) plan.denied_item = static_cast<int>(i);
        break;
      }
    }
  }
  const bool keep = plan.error.ok() && plan.allowed;
  std::vector<HeldLease> release;
  for (size_t i = plan.StoreCount(); i < plan.items.size(); ++i) {
    PlannedItem& item = plan.items[i];
    if (item.lease_id.empty()) continue;
    HeldLease held{item.name, item.key, std::move(item.lease_id)};
    item.lease_id.clear();
    (keep ? plan.held : release).push_back(std::move(held));
  }
  // Never blocks (this may run on a store thread); a failed release is not
  // the request's failure: the lease expires.
  ReleaseAsync(std::move(release));
}

RuleState* Enforcer::Impl::LeaseState(std::string_view rule) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(rule);
  return it == states_.end() ? nullptr : it->second.get();
}

Status Enforcer::Impl::Release(std::span<const HeldLease> leases) {
  Status first;
  for (const HeldLease& lease : leases) {
    auto r = store_->ReleaseLease(lease.key, lease.id);
    if (!r.ok() && first.ok()) first = r.status();
    if (RuleState* s = LeaseState(lease.rule)) s->NoteRelease(r.ok() && *r);
  }
  return first;
}

void Enforcer::Impl::ReleaseAsync(std::vector<HeldLease> leases,
                                  std::function<void(int64_t released)> done) {
  if (leases.empty()) {
    if (done) done(0);
    return;
  }
  struct Pending {
    std::atomic<size_t> left;
    std::atomic<int64_t> released{0};
    std::function<void(int64_t)> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->left.store(leases.size());
  pending->done = std::move(done);
  for (const HeldLease& lease : leases) {
    RuleState* s = LeaseState(lease.rule);
    store_->ReleaseLeaseAsync(lease.key, lease.id, [s, pending](Result<bool> r) {
      const bool live = r.ok() && *r;
      if (s) s->NoteRelease(live);
      if (live) pending->released.fetch_add(1, std::memory_order_relaxed);
      if (pending->left.fetch_sub(1, std::memory_order_acq_rel) == 1 && pending->done) {
        pending->done(pending->released.load(std::memory_order_relaxed));
      }
    });
  }
}

CheckOutcome Enforcer::Impl::Run(Plan& plan) {
  plan.decisions.assign(plan.items.size(), Decision{});
  plan.started_ns = clock_->Now();
  CheckBlocks(plan);
  if (!plan.error.ok()) return Finish(plan);
  AcquireLeases(plan);
  if (!plan.error.ok()) return Finish(plan);
  if (plan.StoreCount() == 0) {
    plan.allowed = true;
    DecideStoreless(plan);
    SettleLeases(plan);
    return Finish(plan);
  }
  auto batch = plan.Batch(plan.StoreCount());
  StoreCallStarted(plan);
  if (Absorb(plan, store_->Acquire(batch), false)) {
    auto again = plan.BatchAgain();
    Absorb(plan, store_->Acquire(again), true);
  }
  StoreCallEnded(plan);
  ApplyBlock(plan);
  DecideStoreless(plan);
  SettleLeases(plan);
  StartBlocks(plan);
  return Finish(plan);
}

namespace {

// Whether an enforced item of the plan has a penalty box (block_for): without
// one, the async path takes no box step and wraps no callback (each wrap of
// `done` is a heap allocation on every decision: request_path_cost_test).
bool HasBoxes(const Plan& plan) {
  for (size_t i = 0; i < plan.enforced_count; ++i) {
    if (plan.items[i].block_limit != nullptr) return true;
  }
  return false;
}

}  // namespace

void Enforcer::Impl::RunAsync(std::shared_ptr<Plan> plan, std::function<void(CheckOutcome)> done) {
  plan->decisions.assign(plan->items.size(), Decision{});
  plan->started_ns = clock_->Now();
  if (!HasBoxes(*plan)) {
    LeasesThenBatchAsync(std::move(plan), std::move(done));
    return;
  }
  CheckBlocksAsync(plan, [this, plan, done = std::move(done)]() mutable {
    if (!plan->error.ok()) {
      done(Finish(*plan));
      return;
    }
    LeasesThenBatchAsync(std::move(plan), std::move(done));
  });
}

void Enforcer::Impl::LeasesThenBatchAsync(std::shared_ptr<Plan> plan,
                                          std::function<void(CheckOutcome)> done) {
  const size_t first = plan->StoreCount();
  AcquireLeasesAsync(plan, first, [this, plan, done = std::move(done)]() mutable {
    if (!plan->error.ok()) {
      done(Finish(*plan));
      return;
    }
    RunBatchAsync(std::move(plan), std::move(done));
  });
}

void Enforcer::Impl::FinishAsync(std::shared_ptr<Plan> plan,
                                 std::function<void(CheckOutcome)> done) {
  StoreCallEnded(*plan);
  ApplyBlock(*plan);
  DecideStoreless(*plan);
  SettleLeases(*plan);
  if (!HasBoxes(*plan)) {
    done(Finish(*plan));
    return;
  }
  StartBlocksAsync(plan, [this, plan, done = std::move(done)]() { done(Finish(*plan)); });
}

void Enforcer::Impl::RunBatchAsync(std::shared_ptr<Plan> plan,
                                   std::function<void(CheckOutcome)> done) {
  if (plan->StoreCount() == 0) {
    plan->allowed = true;
    DecideStoreless(*plan);
    SettleLeases(*plan);
    done(Finish(*plan));
    return;
  }
  auto batch = plan->Batch(plan->StoreCount());
  StoreCallStarted(*plan);
  // `mutable`: FinishAsync takes `done` by move; from a const capture it would be copied, and a
  // copy of a wrapped callback is two allocations per decision (request_path_cost_test).
  store_->AcquireAsync(
      batch, [this, plan, done = std::move(done)](Result<BatchDecision> r) mutable {
        if (!Absorb(*plan, std::move(r), false)) {
          FinishAsync(plan, std::move(done));
          return;
        }
        auto again = plan->BatchAgain();
        store_->AcquireAsync(
            again, [this, plan, done = std::move(done)](Result<BatchDecision> r2) mutable {
              Absorb(*plan, std::move(r2), true);
              FinishAsync(plan, std::move(done));
            });
      });
}

void Enforcer::Impl::Count(Plan& plan) {
  const int64_t now = clock_->Now();
  for (size_t i = 0; i < plan.items.size(); ++i) {
    PlannedItem& item = plan.items[i];
    RuleState& s = *item.state;
    const bool enforced = plan.Enforced(i);
    if (!plan.error.ok()) {
      s.unavailable.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (plan.unenforced) {
      s.unenforced.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // A peeked shadow item (the call was rejected by a deny-all item) would
    // have been over when its cost does not fit what is left.
    const bool fits = plan.peek && !enforced ? item.cost <= plan.decisions[i].remaining
                                             : plan.decisions[i].allowed;
    if (!enforced) {
      // A quota item over its limit in a rejected call was part of the refusal.
      if (!fits) {
        (item.quota && !plan.allowed                       ? s.rejected
         : item.shadow == RuleOutcome::ShadowReason::kSoft ? s.soft_exceeded
                                                           : s.shadow_rejected)
            .fetch_add(1, std::memory_order_relaxed);
      }
      continue;
    }
    if (plan.allowed) s.allowed.fetch_add(1, std::memory_order_relaxed);
    if (static_cast<int>(i) == plan.blocked_item && !plan.allowed) {
      s.blocked.fetch_add(1, std::memory_order_relaxed);
    } else if (!plan.allowed && !fits) {
      s.rejected.fetch_add(1, std::memory_order_relaxed);
    }
    if (!item.rollback) continue;
    const RollbackTrigger tripped =
        s.Record(*item.rollback, !plan.allowed && !fits, now - plan.started_ns, now);
    if (tripped != RollbackTrigger::kNone) NoteTrip(s, tripped, *item.rollback);
  }
}

void Enforcer::Impl::NoteTrip(RuleState& s, RollbackTrigger trigger, const RollbackConfig& c) {
  std::string reason;
  switch (trigger) {
    case RollbackTrigger::kRejectRatio:
      reason = "rejected " + std::to_string(s.window_rejected.load()) + " of " +
               std::to_string(s.window_total.load()) + " decisions in the window (max ratio " +
               std::to_string(c.max_reject_ratio) + ")";
      break;
    case RollbackTrigger::kLatencyP99:
      reason = std::to_string(s.window_slow.load()) + " of " +
               std::to_string(s.window_total.load()) +
               " decisions in the window took longer than " + std::to_string(c.max_p99_ns / 1000) +
               " us (p99 above max_p99_ms)";
      break;
    case RollbackTrigger::kUpstreamErrors:
      reason = "upstream answered 5xx to " + std::to_string(s.window_upstream_errors.load()) +
               " of " + std::to_string(s.window_upstream.load()) +
               " requests in the window, more than " +
               std::to_string(c.max_upstream_error_increase) + " over the baseline ratio " +
               std::to_string(std::max<int64_t>(0, s.baseline_upstream_ppm.load()) / 1e6);
      break;
    case RollbackTrigger::kUpstreamLatencyP99:
      reason = std::to_string(s.window_upstream_slow.load()) + " of " +
               std::to_string(s.window_upstream_timed.load()) +
               " upstream answers in the window took longer than " +
               std::to_string(c.max_upstream_p99_ns / 1000) +
               " us (upstream p99 above max_upstream_p99_ms)";
      break;
    case RollbackTrigger::kNone:
    case RollbackTrigger::kAdmin:
      return;
  }
  RollbackTransition change;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.reason = reason;
    s.origin.clear();
    change.fingerprint = s.fingerprint.empty() ? 0 : RollbackFingerprintOf(s.fingerprint);
  }
  Log("rule '" + s.name + "': rollback guard tripped (" +
      std::string(RollbackTriggerName(trigger)) + "), rule switched to shadow: " + reason);
  change.rule = s.name;
  change.tripped = true;
  change.trigger = trigger;
  change.reason = std::move(reason);
  Announce(change);
}

void Enforcer::Impl::Announce(const RollbackTransition& change) const {
  if (options_.on_rollback && change.fingerprint != 0) options_.on_rollback(change);
}

CheckOutcome Enforcer::Impl::Finish(Plan& plan) {
  CheckOutcome out;
  out.policy_generation = plan.generation;
  out.store_start_ns = plan.store_start_ns;
  out.store_end_ns = plan.store_end_ns;
  out.leases = std::move(plan.held);
  out.trace = std::move(plan.trace);
  // Item indexes in policy order (the plan holds enforced, shadow, storeless).
  // On the stack for a usual policy (issue 32: no allocation per decision).
  std::array<size_t, kInlineItems> inline_order;
  std::vector<size_t> heap_order;
  if (plan.items.size() > kInlineItems) heap_order.resize(plan.items.size());
  const std::span<size_t> by_order =
      plan.items.size() > kInlineItems ? std::span<size_t>(heap_order)
                                       : std::span<size_t>(inline_order.data(), plan.items.size());
  for (size_t i = 0; i < plan.items.size(); ++i) by_order[plan.items[i].order] = i;
  CollectRules(plan, by_order, out);
  if (plan.explain) {
    ExplainVerdict(plan, by_order, out);
  } else {
    Count(plan);
    if (!plan.error.ok() || (plan.unenforced && !plan.allowed)) {
      FinishUnavailable(plan, out);
    } else if (plan.unenforced) {
      out.enforced = false;
      if (const std::string& h = ResponseOf(plan).unenforced_header; !h.empty()) {
        out.headers.push_back({h, "store-unavailable"});
      }
    } else if (plan.allowed) {
      FinishAllowed(plan, by_order, out);
      out.settlement = MakeSettlement(plan);
    } else {
      FinishRejected(plan, out);
    }
  }
  return out;
}

namespace {

// Whether `cost` fits a cost-0 decision `d` of `limit` now, and if not, when:
// a bucket is full in reset_after, so `cost` fits once reset_after + cost *
// interval <= the tolerance; a window at its end.
RuleOutcome::Peek PeekOf(const Decision& d, const Limit& limit, int64_t cost) {
  if (cost <= d.remaining) return {true, Nanos(0)};
  if (cost > limit.burst()) return {false, Decision::kNever};
  if (limit.algorithm() != Algorithm::kTokenBucket &&
      limit.algorithm() != Algorithm::kLeakyBucket) {
    return {false, d.reset_after};
  }
  return {false, std::max(Nanos(0), d.reset_after + Nanos(limit.IncrementFor(cost)) -
                                        Nanos(limit.tolerance_ns()))};
}

}  // namespace

void Enforcer::Impl::CollectRules(const Plan& plan, std::span<const size_t> by_order,
                                  CheckOutcome& out) const {
  out.rules.reserve(plan.items.size());
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
    r.watches_upstream =
        !r.shadow && item.rollback &&
        (item.rollback->max_upstream_error_increase > 0 || item.rollback->max_upstream_p99_ns > 0);
    r.action = item.action;
    if (plan.peek && i < plan.StoreCount()) r.peek = PeekOf(r.decision, item.limit, item.cost);
    if (static_cast<int>(i) == plan.denied_item)
      out.denied_rule = static_cast<int>(out.rules.size());
    out.rules.push_back(std::move(r));
  }
}

void Enforcer::Impl::ExplainVerdict(const Plan& plan, std::span<const size_t> by_order,
                                    CheckOutcome& out) const {
  for (size_t i : by_order) {
    const PlannedItem& item = plan.items[i];
    const Decision& d = plan.decisions[i];
    const bool fits = item.cost <= d.remaining;
    const char* shadow = item.shadow == RuleOutcome::ShadowReason::kSoft   ? " (soft)"
                         : item.shadow != RuleOutcome::ShadowReason::kNone ? " (shadow)"
                                                                           : "";
    if (item.storeless == ExplicitItem::Storeless::kUnlimited) {
      out.trace.push_back(item.name + ": no limit, allowed");
    } else if (item.forbid) {
      out.trace.push_back(item.name + ": denied by the policy, would be refused (403)" + shadow);
    } else {
      out.trace.push_back(item.name + ": " + std::to_string(d.remaining) + " of " +
                          std::to_string(d.limit) + " left; cost " + std::to_string(item.cost) +
                          (fits ? " would be allowed" : " would be rejected") + shadow);
    }
    if (!fits && plan.Enforced(i) && out.verdict == CheckOutcome::Verdict::kAllow) {
      out.verdict = CheckOutcome::Verdict::kReject;
      out.http_status = item.forbid ? 403 : 429;
    }
  }
  if (!plan.error.ok()) {
    out.verdict = CheckOutcome::Verdict::kUnavailable;
    out.http_status = 503;
    out.status = plan.error;
    out.trace.push_back("store error: " + plan.error.ToString());
  }
}

void Enforcer::Impl::FinishUnavailable(const Plan& plan, CheckOutcome& out) const {
  out.verdict = CheckOutcome::Verdict::kUnavailable;
  out.http_status = 503;
  out.enforced = plan.error.ok() ? false : true;
  out.status =
      plan.error.ok() ? UnavailableError("store answered without state (fail-closed)") : plan.error;
  // Retry when the store may decide again (the breaker's next probe), at
  // least 1 s, spread per client by the same jitter as a 429's.
  const Nanos wait = std::max<Nanos>(store_->UnavailableFor(), std::chrono::seconds(1));
  const ResponseOptions& response = ResponseOf(plan);
  out.retry_after_seconds =
      RetryAfterSeconds(wait, plan.items.empty() ? std::string_view() : plan.items[0].key,
                        response.retry_after_jitter, response.jitter_seed);
  out.headers.push_back({"Retry-After", std::to_string(out.retry_after_seconds)});
  out.body =
      ProblemJson(ProblemKind::kTemporaryReducedCapacity, options_.problem_type_base, {},
                  "rate-limit state is unavailable; try again later", out.retry_after_seconds);
  out.headers.push_back({"Cache-Control", "no-store"});
  out.headers.push_back({"Content-Type", "application/problem+json"});
}

void Enforcer::Impl::FinishAllowed(const Plan& plan, std::span<const size_t> by_order,
                                   CheckOutcome& out) const {
  // The reports and their rules' styles, on the stack for a usual policy.
  std::array<QuotaReport, kInlineItems> inline_reports;
  std::array<uint8_t, kInlineItems> inline_styles;
  std::vector<QuotaReport> heap_reports;
  std::vector<uint8_t> heap_styles;
  const bool inline_ok = plan.items.size() <= kInlineItems;
  size_t n = 0;
  bool own_styles = false;
  std::string soft_exceeded;  // the soft rules over their limit, for kSoftExceededHeader
  for (size_t i : by_order) {
    const PlannedItem& item = plan.items[i];
    // Store items, soft rules and concurrency rules (limit = max_in_flight,
    // remaining = free slots); not shadow items nor deny-all / unlimited placeholders.
    const bool soft = item.shadow == RuleOutcome::ShadowReason::kSoft && i < plan.StoreCount();
    if (i >= plan.enforced_count && !soft && !(item.lease && plan.Enforced(i))) continue;
    QuotaReport report = MakeQuotaReport(item.ReportName(), item.limit, plan.decisions[i]);
    if (soft && !plan.decisions[i].allowed) {
      // Admitted over a soft limit: nothing is left of it (r=0), whatever a
      // smaller cost would still find.
      report.remaining = 0;
      if (!soft_exceeded.empty()) soft_exceeded += ", ";
      soft_exceeded += item.ReportName();
    }
    if (inline_ok) {
      inline_reports[n] = std::move(report);
      inline_styles[n] = item.header_styles;
    } else {
      heap_reports.push_back(std::move(report));
      heap_styles.push_back(item.header_styles);
    }
    ++n;
    own_styles = own_styles || item.header_styles != kInheritStyles;
    out.delay = std::max(out.delay, plan.decisions[i].delay);
  }
  const std::span<const QuotaReport> reports =
      inline_ok ? std::span<const QuotaReport>(inline_reports.data(), n) : heap_reports;
  const std::span<const uint8_t> styles =
      inline_ok ? std::span<const uint8_t>(inline_styles.data(), n) : heap_styles;
  out.headers =
      RenderHeaders(ResponseOf(plan), reports, own_styles ? styles : std::span<const uint8_t>());
  if (!soft_exceeded.empty()) {
    out.headers.push_back({std::string(kSoftExceededHeader), std::move(soft_exceeded)});
  }
}

std::vector<HeaderField> Enforcer::Impl::RenderHeaders(const ResponseOptions& response,
                                                       std::span<const QuotaReport> reports,
                                                       std::span<const uint8_t> styles) const {
  // No rule has styles of its own: the server-wide list, the common case.
  if (styles.empty()) {
    return RenderRateLimitHeaders(response.header_styles, reports, clock_->WallNow());
  }
  return RenderRuleHeaders(response.header_styles, reports, styles, clock_->WallNow());
}

void Enforcer::Impl::FinishRejected(const Plan& plan, CheckOutcome& out) const {
  const PlannedItem& denied = plan.items[static_cast<size_t>(plan.denied_item)];
  const Decision& d = plan.decisions[static_cast<size_t>(plan.denied_item)];
  out.verdict = CheckOutcome::Verdict::kReject;
  out.http_status = 429;
  const ResponseOptions& response = ResponseOf(plan);
  const std::string& denied_name = denied.ReportName();
  if (denied.forbid) {
    // A deny rule: refused by the policy, no quota involved, nothing to retry.
    out.http_status = 403;
    if (!response.reason_header.empty()) {
      out.headers.push_back({response.reason_header, "denied; policy=" + SfString(denied_name)});
    }
    out.headers.push_back({"Cache-Control", "no-store"});
    out.headers.push_back({"Content-Type", "application/problem+json"});
    const std::string violated[] = {denied_name};
    const std::string refused = "refused by policy '" + denied_name + "'";
    out.body =
        ProblemJson(ProblemKind::kForbidden, options_.problem_type_base, violated, refused, 0);
    if (denied.response != nullptr) {
      ApplyRuleResponse(*denied.response, denied_name, "about:blank", "Forbidden", refused, 0, out);
    }
    return;
  }
  // A deny-all item has no quota to report (its limit is a placeholder).
  const bool deny_all = denied.storeless == ExplicitItem::Storeless::kDenyAll;
  std::string detail;
  QuotaReport report;  // the denying rule's, unless deny_all
  // A penalty box names its end exactly: no jitter (it is no refill race).
  const bool blocked = plan.denied_item == plan.blocked_item;
  if (!deny_all && d.retry_after != Decision::kNever) {
    const bool boxed = blocked || plan.closed_denied;
    out.retry_after_seconds = RetryAfterSeconds(
        d.retry_after, denied.key, boxed ? 0 : response.retry_after_jitter, response.jitter_seed);
  }
  if (!deny_all) {
    report = MakeQuotaReport(denied_name, denied.limit, d);
    // Every style's reset names the instant Retry-After names (jitter included).
    if (out.retry_after_seconds > 0) report.reset_seconds = out.retry_after_seconds;
  }
  const std::span<const QuotaReport> reports(&report, deny_all ? 0 : 1);
  // The denying rule's own styles, else the server's.
  const uint8_t own = denied.header_styles;
  // A rule whose answer sends no rate-limit headers ("ratelimit_headers":
  // false) still sends Retry-After.
  if (denied.response == nullptr || denied.response->ratelimit_headers) {
    out.headers =
        RenderHeaders(response, reports,
                      own == kInheritStyles || reports.empty() ? std::span<const uint8_t>()
                                                               : std::span<const uint8_t>(&own, 1));
  }
  out.headers.reserve(out.headers.size() + 4);  // Retry-After, reason, Cache-Control, Content-Type
  if (deny_all) {
    detail = "policy '" + denied_name + "' allows no requests";
  } else if (d.retry_after == Decision::kNever) {
    detail = "the cost of this request (" + std::to_string(denied.cost) +
             ") exceeds the capacity of policy '" + denied_name + "' (" +
             std::to_string(denied.limit.burst()) + "); it can never be allowed";
  } else if (denied.lease) {
    // A slot usually frees when a request ends, long before the soonest
    // lease expires (retry_after, an upper bound): ask to retry within 1 s.
    out.retry_after_seconds =
        RetryAfterSeconds(std::min<Nanos>(d.retry_after, kLeaseRetryCap), denied.key,
                          response.retry_after_jitter, response.jitter_seed);
    out.headers.push_back({"Retry-After", std::to_string(out.retry_after_seconds)});
    detail = "concurrency limit of policy '" + denied_name + "' reached (" +
             std::to_string(denied.lease->max_in_flight()) + " in flight); retry after " +
             std::to_string(out.retry_after_seconds) + " s";
  } else if (blocked) {
    out.headers.push_back({"Retry-After", std::to_string(out.retry_after_seconds)});
    detail = "key blocked by policy '" + denied_name + "'" +
             (denied.rule != nullptr ? " (block_for " + FormatPeriod(denied.rule->block_for) + ")"
                                     : std::string()) +
             " after it was refused; retry after " + std::to_string(out.retry_after_seconds) + " s";
  } else {
    out.headers.push_back({"Retry-After", std::to_string(out.retry_after_seconds)});
    // Appended into one buffer: no temporaries (issue 32).
    const std::string seconds = std::to_string(out.retry_after_seconds);
    constexpr std::string_view kHead = "rate limit of policy '";
    constexpr std::string_view kMiddle = "' exceeded; retry after ";
    detail.reserve(kHead.size() + denied_name.size() + kMiddle.size() + seconds.size() + 2);
    detail.append(kHead).append(denied_name).append(kMiddle).append(seconds).append(" s");
  }
  if (!response.reason_header.empty()) {
    const std::string_view what =
        denied.lease ? std::string_view("concurrency") : AlgorithmName(denied.limit.algorithm());
    const std::string policy = SfString(denied_name);
    constexpr std::string_view kExceeded = "_exceeded; policy=";
    std::string reason;
    if (blocked) {
      reason = "blocked; policy=" + policy;
    } else {
      reason.reserve(what.size() + kExceeded.size() + policy.size());
      reason.append(what).append(kExceeded).append(policy);
    }
    out.headers.push_back({response.reason_header, std::move(reason)});
  }
  out.headers.push_back({"Cache-Control", "no-store"});
  out.headers.push_back({"Content-Type", "application/problem+json"});
  const std::string violated[] = {denied_name};
  out.body = ProblemJson(ProblemKind::kQuotaExceeded, options_.problem_type_base, violated, detail,
                         out.retry_after_seconds);
  if (denied.response != nullptr) {
    ApplyRuleResponse(*denied.response, denied_name, options_.problem_type_base + "quota-exceeded",
                      "Request cannot be satisfied as assigned quota has been exceeded", detail,
                      deny_all ? 0 : report.quota, out);
  }
}

std::vector<RuleCounters> Enforcer::Impl::Counters(const FrontEnd* front_end) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RuleCounters> out;
  for (const auto& [name, s] : front_end != nullptr ? front_end->states : states_) {
    RuleCounters c;
    c.rule = name;
#define TOLLGATE_COPY_RULE_COUNTER(field, label) c.field = s->field.load(std::memory_order_relaxed);
    TOLLGATE_ALL_RULE_COUNTERS(TOLLGATE_COPY_RULE_COUNTER)
#undef TOLLGATE_COPY_RULE_COUNTER
    {
      std::lock_guard<std::mutex> refunds_lock(s->refunds_mu);
      c.refunds = s->refunds;
    }
    c.rolled_back = s->tripped.load(std::memory_order_acquire);
    if (c.rolled_back) {
      c.rollback_reason = s->reason;
      c.rollback_trigger = s->trigger.load(std::memory_order_acquire);
    }
    for (size_t t = 0; t < kRollbackTriggerCount; ++t) {
      c.rollback_trips[t] = s->trips[t].load(std::memory_order_relaxed);
    }
    if (c.rolled_back) c.rollback_origin = s->origin;
    if (!s->fingerprint.empty()) c.rollback_fingerprint = RollbackFingerprintOf(s->fingerprint);
    out.push_back(std::move(c));
  }
  return out;
}

bool Enforcer::Impl::ResetRollback(std::string_view rule) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(rule);
    if (it == states_.end()) return false;
    if (it->second->tripped.load(std::memory_order_acquire)) {
      it->second->rollback_clears.fetch_add(1, std::memory_order_relaxed);
    }
    it->second->ResetGuard();
    it->second->reason.clear();
    it->second->origin.clear();
  }
  // Cleared here whether or not it was tripped here: other instances may be.
  RollbackTransition change;
  change.rule = std::string(rule);
  change.fingerprint = RollbackFingerprint(rule);
  change.by_operator = true;
  Announce(change);
  return true;
}

uint64_t Enforcer::Impl::RollbackFingerprint(std::string_view rule) const {
  const std::shared_ptr<const Policy> live = policies_->Current();
  const int index = live->Find(rule);
  return index < 0 ? 0 : RollbackFingerprintOf(live->rules[index].fingerprint);
}

bool Enforcer::Impl::AdoptRollback(const RollbackTransition& change) {
  const std::shared_ptr<const Policy> live = policies_->Current();
  const int index = live->Find(change.rule);
  if (index < 0) return false;
  const Rule& rule = live->rules[index];
  if (change.fingerprint != RollbackFingerprintOf(rule.fingerprint)) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RuleState* s = StateFor(rule.name);
    // As Bind would on the first decision under this policy, so that a
    // decision after the adoption does not reset it as a rule change.
    SyncFingerprint(*s, rule);
    if (change.tripped) {
      bool expected = false;
      if (!s->tripped.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
        return false;
      }
      const RollbackTrigger why =
          change.trigger == RollbackTrigger::kNone ? RollbackTrigger::kAdmin : change.trigger;
      s->trigger.store(why, std::memory_order_release);
      s->rollback_adopted_trips.fetch_add(1, std::memory_order_relaxed);
      s->reason = change.reason;
      s->origin = change.origin;
    } else {
      if (!s->tripped.load(std::memory_order_acquire)) return false;
      s->ResetGuard();
      s->reason.clear();
      s->origin.clear();
      s->rollback_adopted_clears.fetch_add(1, std::memory_order_relaxed);
    }
  }
  Log("rule '" + rule.name + "': rollback guard " +
      (change.tripped ? "tripped (" + std::string(RollbackTriggerName(change.trigger)) +
                            ") on instance " + change.origin + ", rule switched to shadow here too"
                      : std::string("cleared on instance ") + change.origin + ", enforcing again"));
  return true;
}

bool Enforcer::Impl::TripRollback(std::string_view rule, std::string_view reason) {
  // Only a rule of the current policy: a state of a removed rule would trip nothing.
  if (policies_->Current()->Find(rule) < 0) return false;
  RuleState* s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = StateFor(std::string(rule));
    if (!s->Trip(RollbackTrigger::kAdmin)) return true;  // tripped already: keep its reason
    s->reason = "tripped by an operator: " + std::string(reason);
    s->origin.clear();
  }
  Log("rule '" + s->name + "': rollback guard tripped by an operator, rule switched to shadow");
  RollbackTransition change;
  change.rule = std::string(rule);
  change.fingerprint = RollbackFingerprint(rule);
  change.tripped = true;
  change.trigger = RollbackTrigger::kAdmin;
  change.reason = "tripped by an operator: " + std::string(reason);
  change.by_operator = true;
  Announce(change);
  return true;
}

void Enforcer::Impl::RecordUpstream(const CheckOutcome& outcome, int status, Nanos latency) {
  const bool server_error = status >= 500 && status <= 599;
  const int64_t now = clock_->Now();
  for (const RuleOutcome& r : outcome.rules) {
    if (!r.watches_upstream) continue;
    RuleState* s;
    std::optional<RollbackConfig> config;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = states_.find(r.rule);
      if (it == states_.end()) continue;
      s = it->second.get();
      config = s->rollback;
    }
    if (!config) continue;  // a reload removed the guard since the decision
    const RollbackTrigger tripped = s->RecordUpstream(*config, server_error, latency.count(), now);
    if (tripped != RollbackTrigger::kNone) NoteTrip(*s, tripped, *config);
  }
}

Status ValidateResponseOptions(const ResponseOptions& options) {
  if (!(options.retry_after_jitter >= 0 && options.retry_after_jitter <= 10)) {
    return InvalidArgument("enforcer: retry_after_jitter must be between 0 and 10");
  }
  {
    std::vector<HeaderStyle> styles;
    std::string why;
    if (!ParseHeaderStyles(HeaderStylesName(options.header_styles), &styles, &why)) {
      return InvalidArgument("enforcer: header_styles: " + why);
    }
  }
  // Header names we send: letters, digits, '-' and '_' (empty: not sent).
  auto header_name_ok = [](std::string_view name) {
    for (char c : name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
      if (!ok) return false;
    }
    return true;
  };
  if (!header_name_ok(options.reason_header)) {
    return InvalidArgument("enforcer: reason_header is not a valid header name");
  }
  if (!header_name_ok(options.unenforced_header)) {
    return InvalidArgument("enforcer: unenforced_header is not a valid header name");
  }
  return Status::Ok();
}

Result<std::unique_ptr<Enforcer>> Enforcer::Create(std::shared_ptr<PolicyStore> policies,
                                                   Store* store, const Clock* clock,
                                                   EnforcerOptions options) {
  if (!policies) return InvalidArgument("enforcer: no policy store");
  if (!store) return InvalidArgument("enforcer: no store");
  if (!clock) return InvalidArgument("enforcer: no clock");
  if (Status st = ValidateResponseOptions(options); !st.ok()) return st;
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

Result<Enforcer::FrontEnd*> Enforcer::AddFrontEnd(ResponseOptions response) {
  if (Status st = ValidateResponseOptions(response); !st.ok()) return st;
  return impl_->AddFrontEnd(std::move(response));
}

Result<CheckOutcome> Enforcer::CheckItems(std::span<const ExplicitItem> items,
                                          FrontEnd* front_end) {
  auto plan = impl_->PlanItems(items, front_end);
  if (!plan.ok()) return plan.status();
  return impl_->Run(**plan);
}

void Enforcer::CheckItemsAsync(std::span<const ExplicitItem> items,
                               std::function<void(Result<CheckOutcome>)> done,
                               FrontEnd* front_end) {
  auto plan = impl_->PlanItems(items, front_end);
  if (!plan.ok()) {
    done(plan.status());
    return;
  }
  impl_->RunAsync(std::move(*plan),
                  [done = std::move(done)](CheckOutcome outcome) { done(std::move(outcome)); });
}

RuleHandle Enforcer::HandleFor(std::string_view name, FrontEnd* front_end) {
  return RuleHandle(impl_->HandleFor(std::string(name), front_end));
}

Status Enforcer::Release(std::span<const HeldLease> leases) { return impl_->Release(leases); }

void Enforcer::ReleaseAsync(std::vector<HeldLease> leases,
                            std::function<void(int64_t released)> done) {
  impl_->ReleaseAsync(std::move(leases), std::move(done));
}

std::string Enforcer::LeaseToken(const HeldLease& lease) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token = lease.id;
  token.push_back('.');
  for (unsigned char c : lease.key) {
    token.push_back(kHex[c >> 4]);
    token.push_back(kHex[c & 15]);
  }
  return token;
}

Result<HeldLease> Enforcer::ParseLeaseToken(std::string_view token) const {
  if (token.size() > kMaxLeaseTokenLength) {
    return InvalidArgument("lease: longer than " + std::to_string(kMaxLeaseTokenLength) +
                           " characters");
  }
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos) return InvalidArgument("lease: no '.' after the lease id");
  HeldLease lease;
  lease.id = std::string(token.substr(0, dot));
  if (!ValidLeaseId(lease.id)) {
    return InvalidArgument("lease: the id must be 1 to 32 lowercase hex digits");
  }
  const std::string_view hex = token.substr(dot + 1);
  if (hex.empty() || hex.size() % 2 != 0) {
    return InvalidArgument("lease: the key must be an even number of hex digits");
  }
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return InvalidArgument("lease: byte " + std::to_string(dot + 1 + i) +
                             " is not a lowercase hex digit");
    }
    lease.key.push_back(static_cast<char>(hi * 16 + lo));
  }
  // Only a concurrency rule's lease set: "<rule>\x1fconcurrency\x1f<identity>".
  static constexpr std::string_view kMarker =
      "\x1f"
      "concurrency"
      "\x1f";
  const size_t at = lease.key.find(kMarker);
  if (at == std::string::npos || at == 0 || lease.key.find('\x1f') != at) {
    return InvalidArgument("lease: the key is not a concurrency rule's");
  }
  lease.rule = lease.key.substr(0, at);
  // The rule must limit concurrency in the policy in force now: a token naming
  // another rule, or one a reload removed or changed, releases nothing.
  const std::shared_ptr<const Policy> live = policies().Current();
  const int index = live->Find(lease.rule);
  if (index < 0 || !live->rules[static_cast<size_t>(index)].lease) {
    // The name is the client's bytes: not echoed.
    return InvalidArgument("lease: its rule is not a concurrency rule of the current policy");
  }
  return lease;
}

LeaseRelease::~LeaseRelease() {
  if (enforcer_ != nullptr && !leases_.empty()) enforcer_->ReleaseAsync(std::move(leases_));
}

LeaseRelease& LeaseRelease::operator=(LeaseRelease&& other) noexcept {
  if (this != &other) {
    LeaseRelease old(std::move(*this));
    enforcer_ = std::exchange(other.enforcer_, nullptr);
    leases_ = std::move(other.leases_);
    other.leases_.clear();
  }
  return *this;
}

std::string Enforcer::ClientIp(const RequestView& request) const {
  return impl_->ClientIp(request);
}

std::vector<RuleCounters> Enforcer::Counters(const FrontEnd* front_end) const {
  return impl_->Counters(front_end);
}

bool Enforcer::ResetRollback(std::string_view rule) { return impl_->ResetRollback(rule); }

bool Enforcer::TripRollback(std::string_view rule, std::string_view reason) {
  return impl_->TripRollback(rule, reason);
}

bool Enforcer::AdoptRollback(const RollbackTransition& change) {
  return impl_->AdoptRollback(change);
}

uint64_t Enforcer::RollbackFingerprint(std::string_view rule) const {
  return impl_->RollbackFingerprint(rule);
}

void Enforcer::RecordUpstream(const CheckOutcome& outcome, int status, Nanos latency) {
  impl_->RecordUpstream(outcome, status, latency);
}

std::string_view RollbackTriggerName(RollbackTrigger trigger) {
  switch (trigger) {
    case RollbackTrigger::kNone:
      return "none";
    case RollbackTrigger::kRejectRatio:
      return "reject_ratio";
    case RollbackTrigger::kLatencyP99:
      return "latency_p99";
    case RollbackTrigger::kUpstreamErrors:
      return "upstream_errors";
    case RollbackTrigger::kAdmin:
      return "admin";
    case RollbackTrigger::kUpstreamLatencyP99:
      return "upstream_latency_p99";
  }
  return "none";
}

RollbackTrigger RollbackTriggerFromName(std::string_view name) {
  for (size_t t = 1; t < kRollbackTriggerCount; ++t) {
    if (RollbackTriggerName(RollbackTrigger(t)) == name) return RollbackTrigger(t);
  }
  return RollbackTrigger::kNone;
}

const EnforcerOptions& Enforcer::options() const { return impl_->options_; }

PolicyStore& Enforcer::policies() const { return *impl_->policies_; }

std::string_view VerdictName(CheckOutcome::Verdict v) {
  switch (v) {
    case CheckOutcome::Verdict::kAllow:
      return "allow";
    case CheckOutcome::Verdict::kReject:
      return "reject";
    case CheckOutcome::Verdict::kUnavailable:
      return "unavailable";
  }
  return "allow";
}

}  // namespace tollgate
