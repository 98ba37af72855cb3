#include "tollgate/resilient_store.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "base/one_shot.h"
#include "resilient/charge_back_ledger.h"
#include "resilient/degraded_limit.h"
#include "tollgate/local_store.h"

namespace tollgate {
namespace {

// Errors that mean "the primary is not answering well", as opposed to errors
// about the caller's input, which pass through untouched.
bool IsOutage(StatusCode code) {
  switch (code) {
    case StatusCode::kTimeout:
    case StatusCode::kConnection:
    case StatusCode::kScript:
    case StatusCode::kServer:
    case StatusCode::kUnavailable:
    case StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

Decision UnenforcedDecision(const Limit& limit) {
  Decision d;
  d.allowed = true;
  d.limit = limit.burst();
  d.remaining = limit.burst();
  return d;
}

void Bump(std::atomic<uint64_t>& c, uint64_t by = 1) { c.fetch_add(by, std::memory_order_relaxed); }

}  // namespace

class ResilientStore::Impl {
 public:
  Impl(std::unique_ptr<Store> primary, ResilientStoreOptions options,
       std::unique_ptr<LocalStore> local)
      : primary_(std::move(primary)),
        primary_name_(primary_->Name()),
        fleet_(std::move(options.fleet)),
        options_(std::move(options)),
        breaker_(WrapListener(options_.breaker)),
        local_(std::move(local)),
        ledger_(options_.max_charge_back_keys),
        probe_limit_(ProbeLimit()),
        last_answer_(kNeverAnswered),
        instances_(std::max<int64_t>(1, options_.initial_instances)) {}

  ~Impl() {
    StopThread();
    // The fleet may send its last command (ZREM) through the primary's connections.
    fleet_.reset();
    // The primary fails its queued async calls as it shuts down; their
    // callbacks use the breaker, the local store and the ledger, so it goes first.
    primary_.reset();
  }

  void StartThread() {
    thread_ = std::thread([this] { Loop(); });
    prober_ = std::thread([this] { ProbeLoop(); });
  }

  void StopThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    probe_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (prober_.joinable()) prober_.join();  // waits for a probe in flight (<= the deadline)
  }

  // Sends one probe when one is due: a zero-cost peek on options_.probe_key
  // through the primary, under the same deadline as any call. Its outcome only
  // moves the breaker; no client waits for it. False when no probe was due.
  bool ProbeOnce() {
    const CircuitBreaker::Permit permit = breaker_.TryProbe();
    if (!permit.admitted()) return false;
    const AcquireItem item{options_.probe_key, &probe_limit_, 0};
    const std::span<const AcquireItem> items(&item, 1);
    Result<BatchDecision> r =
        options_.call_deadline > Nanos(0) ? GuardedAcquire(items) : primary_->Acquire(items);
    const bool ok = r.ok() || !IsOutage(r.status().code());
    if (ok) NoteAnswer();
    if (!ok) Bump(primary_failures_);
    breaker_.Record(permit, ok);
    return true;
  }

  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) {
    const CircuitBreaker::Permit permit = breaker_.Allow();
    if (!permit.admitted()) {
      Bump(short_circuited_);
      return Fallback(items);
    }
    const int64_t started = options_.clock->Now();
    if (options_.call_deadline > Nanos(0))
      return Settle(permit, started, GuardedAcquire(items), items);
    Result<BatchDecision> r = primary_->Acquire(items);
    return Settle(permit, started, std::move(r), items);
  }

  // The primary's AcquireAsync, waited for at most call_deadline.
  Result<BatchDecision> GuardedAcquire(std::span<const AcquireItem> items) {
    return Guarded<BatchDecision>(
        [&](auto done) { primary_->AcquireAsync(items, std::move(done)); });
  }

  // Starts a primary call (`start` takes its callback) and waits for its
  // answer at most call_deadline on the I/O clock; a late answer is dropped
  // (its callback only fills the shared slot nobody reads any more).
  template <typename T, typename Start>
  Result<T> Guarded(Start&& start) {
    const Clock& io_clock = *options_.io_clock;
    const int64_t deadline = io_clock.Now() + options_.call_deadline.count();
    auto slot = std::make_shared<base::OneShot<Result<T>>>();
    start([slot](Result<T> r) { slot->Set(std::move(r)); });
    std::optional<Result<T>> result = slot->WaitUntil(io_clock, deadline);
    if (!result) {
      Bump(deadline_expired_);
      return TimeoutError("rate-limit store " + primary_name_ + " did not answer within " +
                          std::to_string(options_.call_deadline.count() / 1'000'000) + "ms");
    }
    return std::move(*result);
  }

  void AcquireAsync(std::span<const AcquireItem> items, Callback done) {
    const CircuitBreaker::Permit permit = breaker_.Allow();
    if (!permit.admitted()) {
      Bump(short_circuited_);
      done(Fallback(items));
      return;
    }
    // Own copies, so that a failure can still be answered after the caller's
    // items are gone.
    struct Owned {
      std::vector<std::string> keys;
      std::vector<Limit> limits;
      std::vector<AcquireItem> items;
    };
    auto owned = std::make_shared<Owned>();
    owned->keys.reserve(items.size());
    owned->limits.reserve(items.size());
    owned->items.reserve(items.size());
    for (const AcquireItem& it : items) {
      owned->keys.emplace_back(it.key);
      owned->limits.push_back(*it.limit);
    }
    for (size_t i = 0; i < items.size(); ++i)
      owned->items.push_back(
          AcquireItem{owned->keys[i], &owned->limits[i], items[i].cost, items[i].failure_mode});
    const int64_t started = options_.clock->Now();
    primary_->AcquireAsync(owned->items, [this, owned, permit, started,
                                          done = std::move(done)](Result<BatchDecision> r) {
      done(Settle(permit, started, std::move(r), owned->items));
    });
  }

  // Leases: through the breaker like a batch; an outage is answered by the
  // lease's failure-mode tag (the rule's), else the store's default mode.
  Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) {
    const CircuitBreaker::Permit permit = breaker_.Allow();
    if (!permit.admitted()) {
      Bump(short_circuited_);
      return LeaseFallback(key, limit);
    }
    const int64_t started = options_.clock->Now();
    if (options_.call_deadline > Nanos(0)) {
      // A lease granted after the deadline is not used and comes back at its expiry.
      return SettleLease(permit, started, Guarded<LeaseDecision>([&](auto done) {
                           primary_->AcquireLeaseAsync(key, limit, std::move(done));
                         }),
                         key, limit);
    }
    Result<LeaseDecision> r = primary_->AcquireLease(key, limit);
    return SettleLease(permit, started, std::move(r), key, limit);
  }

  void AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit, Store::LeaseCallback done) {
    const CircuitBreaker::Permit permit = breaker_.Allow();
    if (!permit.admitted()) {
      Bump(short_circuited_);
      done(LeaseFallback(key, limit));
      return;
    }
    const int64_t started = options_.clock->Now();
    primary_->AcquireLeaseAsync(key, limit,
                                [this, key = std::string(key), limit, permit, started,
                                 done = std::move(done)](Result<LeaseDecision> r) {
                                  done(SettleLease(permit, started, std::move(r), key, limit));
                                });
  }

  // A lease granted by the degrade table is released there; any other goes
  // to the primary unless the breaker is open (then it expires).
  void ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                         Store::ReleaseCallback done) {
    // Both draw 128 random bits: the local table answers false for an id it
    // never granted (and refuses one of another form; not an error here).
    Result<bool> local = local_->ReleaseLease(key, lease_id);
    if (local.ok() && *local) {
      done(true);
      return;
    }
    if (breaker_.state() == BreakerState::kOpen) {
      done(UnavailableError("rate-limit store " + primary_name_ +
                            " unavailable; the lease comes back at its expiry"));
      return;
    }
    primary_->ReleaseLeaseAsync(key, lease_id, std::move(done));
  }

  Result<LeaseDecision> SettleLease(const CircuitBreaker::Permit& permit, int64_t started,
                                    Result<LeaseDecision> r, std::string_view key,
                                    const LeaseLimit& limit) {
    if (Record(permit, started, r.ok() ? Status() : r.status())) return r;
    return LeaseFallback(key, limit);
  }

  // The mode's answer for a lease (its tag, else the store's default): closed
  // refuses (503), open admits unenforced without a lease, degrade takes a
  // lease in the local table at this instance's share of max_in_flight (at
  // least 1).
  Result<LeaseDecision> LeaseFallback(std::string_view key, const LeaseLimit& limit) {
    switch (limit.failure_mode().value_or(options_.mode)) {
      case FailureMode::kClosed:
        Bump(closed_rejections_);
        return UnavailableError("rate-limit store " + primary_name_ +
                                " unavailable (fail-closed, breaker " +
                                std::string(BreakerStateName(breaker_.state())) + ")");
      case FailureMode::kOpen: {
        Bump(open_decisions_);
        LeaseDecision d;
        d.allowed = true;
        d.enforced = false;
        d.limit = d.remaining = limit.max_in_flight();
        return d;
      }
      case FailureMode::kDegrade:
        break;
    }
    const double share =
        options_.degrade_fraction / static_cast<double>(instances_.load(std::memory_order_relaxed));
    const auto scaled_max = std::max<int64_t>(
        1, static_cast<int64_t>(static_cast<double>(limit.max_in_flight()) * std::min(1.0, share)));
    auto scaled = LeaseLimit::Create(scaled_max, Nanos(limit.lease_ns()));
    if (!scaled.ok()) return scaled.status();
    Bump(degraded_decisions_);
    return local_->AcquireLease(key, *scaled);
  }

  // Records the primary's outcome and answers: the primary's answer, or the mode's.
  // `started` is options_.clock->Now() when the call was sent.
  Result<BatchDecision> Settle(const CircuitBreaker::Permit& permit, int64_t started,
                               Result<BatchDecision> r, std::span<const AcquireItem> items) {
    if (Record(permit, started, r.ok() ? Status() : r.status())) return r;
    return Fallback(items);
  }

  // Records the primary's outcome (`status` of a call sent at `started`) on
  // the breaker and in the counters; true when the primary answered (its
  // answer stands), false for an outage (the mode answers).
  bool Record(const CircuitBreaker::Permit& permit, int64_t started, const Status& status) {
    if (status.ok() || !IsOutage(status.code())) {
      breaker_.Record(permit, true);
      NoteAnswer();
      Bump(primary_decisions_);
      return true;
    }
    Bump(primary_failures_);
    // A call that met its deadline while the primary answered nothing since it
    // was sent (or nothing at all yet): the primary is hung, not slow on one
    // call. Open now, so that no caller waits the deadline a second time while
    // the streak fills up.
    if (status.code() == StatusCode::kTimeout && NoAnswerSince(started)) {
      breaker_.RecordNoAnswer(permit);
    } else {
      breaker_.Record(permit, false);
    }
    return false;
  }

  // Remembers that the primary answered (to kAnswerGrainNs: at most one store
  // per grain, so the hot path mostly only reads this shared word).
  void NoteAnswer() {
    const int64_t now = options_.clock->Now();
    const int64_t last = last_answer_.load(std::memory_order_relaxed);
    if (last == kNeverAnswered || now - last >= kAnswerGrainNs)
      last_answer_.store(now, std::memory_order_relaxed);
  }

  // Whether the primary answered nothing since `started` (options_.clock), or
  // never answered at all. A noted answer may be up to kAnswerGrainNs later
  // than last_answer_, so only one noted a grain before `started` counts as
  // older: the test errs towards "it answered" (not opening).
  bool NoAnswerSince(int64_t started) const {
    const int64_t last = last_answer_.load(std::memory_order_relaxed);
    return last == kNeverAnswered || last + kAnswerGrainNs < started;
  }

  // Key administration is never answered by a failure mode: while the
  // breaker is open the caller learns that the primary's state was not changed.
  Status ResetKey(std::string_view key, const Limit& limit) {
    // The degraded bucket first (a local store keys by the key alone; the
    // limit's algorithm is all it reads), so an outage's local debt goes too.
    if (Status st = local_->ResetKey(key, limit); !st.ok()) return st;
    if (breaker_.state() == BreakerState::kOpen) return BreakerOpenError();
    return primary_->ResetKey(key, limit);
  }
  Result<Decision> SetRemaining(std::string_view key, const Limit& limit, int64_t remaining) {
    if (Status st = CheckRemaining(limit, remaining); !st.ok()) return st;
    if (breaker_.state() == BreakerState::kOpen) return BreakerOpenError();
    return primary_->SetRemaining(key, limit, remaining);
  }
  Status BreakerOpenError() const {
    return UnavailableError("rate-limit store " + primary_name_ +
                            " unavailable (breaker open): the key was not changed");
  }

  Result<BatchDecision> Fallback(std::span<const AcquireItem> items) {
    bool any_open = false, any_degrade = false;
    std::vector<FailureMode> modes;
    modes.reserve(items.size());
    for (const AcquireItem& it : items) {
      const FailureMode m = it.failure_mode.value_or(options_.mode);
      if (m == FailureMode::kClosed) {
        Bump(closed_rejections_);
        return UnavailableError("rate-limit store " + primary_name_ +
                                " unavailable (fail-closed, breaker " +
                                std::string(BreakerStateName(breaker_.state())) + ")");
      }
      any_open |= m == FailureMode::kOpen;
      any_degrade |= m == FailureMode::kDegrade;
      modes.push_back(m);
    }
    BatchDecision out;
    out.allowed = true;
    out.enforced = !any_open;
    out.decisions.resize(items.size());
    if (!any_degrade) {
      Bump(open_decisions_);
      for (size_t i = 0; i < items.size(); ++i)
        out.decisions[i] = UnenforcedDecision(*items[i].limit);
      return out;
    }

    // Degrade: decide the kDegrade items together on local buckets at our share.
    const double share =
        options_.degrade_fraction / static_cast<double>(instances_.load(std::memory_order_relaxed));
    std::vector<Limit> scaled;
    std::vector<AcquireItem> local_items;
    std::vector<size_t> origin;
    scaled.reserve(items.size());
    local_items.reserve(items.size());
    origin.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      if (modes[i] != FailureMode::kDegrade) continue;
      Result<Limit> l = resilient::ScaleLimit(*items[i].limit, std::min(1.0, share));
      if (!l.ok()) return InternalError("degrade: cannot scale limit: " + l.status().message());
      scaled.push_back(*l);
      origin.push_back(i);
    }
    for (size_t j = 0; j < origin.size(); ++j)
      local_items.push_back(AcquireItem{items[origin[j]].key, &scaled[j], items[origin[j]].cost});
    Result<BatchDecision> local = local_->Acquire(local_items);
    if (!local.ok()) return local.status();
    Bump(degraded_decisions_);
    out.allowed = local->allowed;
    out.denied_index = local->denied_index < 0 ? -1 : static_cast<int>(origin[local->denied_index]);
    // A denial by a kDegrade item is enforced even when kOpen items ride along:
    // the caller must answer it as a rate-limit rejection (429), not as a store
    // without state.
    if (!out.allowed) out.enforced = true;
    for (size_t i = 0; i < items.size(); ++i) {
      if (modes[i] == FailureMode::kOpen) out.decisions[i] = UnenforcedDecision(*items[i].limit);
    }
    for (size_t j = 0; j < origin.size(); ++j) out.decisions[origin[j]] = local->decisions[j];
    if (out.allowed) {
      Bump(degraded_allowed_);
      if (options_.charge_back) {
        for (size_t j = 0; j < origin.size(); ++j) {
          const AcquireItem& it = items[origin[j]];
          if (it.cost > 0 && !ledger_.Add(it.key, *it.limit, it.cost))
            Bump(charge_back_dropped_, static_cast<uint64_t>(it.cost));
        }
      }
    }
    return out;
  }

  void SettleAsync(std::span<const SettleItem> items, SettleCallback done) {
    const CircuitBreaker::Permit permit = breaker_.Allow();
    if (!permit.admitted()) {
      Bump(short_circuited_);
      done(SettleFallback(items));
      return;
    }
    struct Owned {
      std::vector<std::string> keys;
      std::vector<Limit> limits;
      std::vector<SettleItem> items;
    };
    auto owned = std::make_shared<Owned>();
    owned->keys.reserve(items.size());
    owned->limits.reserve(items.size());
    for (const SettleItem& it : items) {
      owned->keys.emplace_back(it.key);
      owned->limits.push_back(*it.limit);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      SettleItem copy = items[i];
      copy.key = owned->keys[i];
      copy.limit = &owned->limits[i];
      owned->items.push_back(copy);
    }
    const int64_t started = options_.clock->Now();
    primary_->SettleAsync(owned->items, [this, owned, permit, started,
                                         done = std::move(done)](Result<std::vector<Settled>> r) {
      if (r.ok() || !IsOutage(r.status().code())) {
        breaker_.Record(permit, true);
        NoteAnswer();
        done(std::move(r));
        return;
      }
      Bump(primary_failures_);
      if (r.status().code() == StatusCode::kTimeout && NoAnswerSince(started)) {
        breaker_.RecordNoAnswer(permit);
      } else {
        breaker_.Record(permit, false);
      }
      done(SettleFallback(owned->items));
    });
  }

  // The failure modes' settlements (see resilient_store.h).
  Result<std::vector<Settled>> SettleFallback(std::span<const SettleItem> items) {
    std::vector<Settled> out(items.size());
    const double share =
        options_.degrade_fraction / static_cast<double>(instances_.load(std::memory_order_relaxed));
    for (size_t i = 0; i < items.size(); ++i) {
      const SettleItem& it = items[i];
      out[i].enforced = false;
      out[i].decision = UnenforcedDecision(*it.limit);
      if (it.failure_mode.value_or(options_.mode) != FailureMode::kDegrade) {
        Bump(settlements_lost_);
        continue;
      }
      Result<Limit> l = resilient::ScaleLimit(*it.limit, std::min(1.0, share));
      if (!l.ok()) return InternalError("degrade: cannot scale limit: " + l.status().message());
      SettleItem local = it;
      local.limit = &*l;
      Result<std::vector<Settled>> r = local_->Settle(std::span<const SettleItem>(&local, 1));
      if (!r.ok()) return r.status();
      out[i] = r->front();
      Bump(settlements_degraded_);
      if (options_.charge_back && out[i].charged > 0 &&
          !ledger_.Add(it.key, *it.limit, out[i].charged))
        Bump(charge_back_dropped_, static_cast<uint64_t>(out[i].charged));
    }
    return out;
  }

  void RunMaintenance() {
    const BreakerState state = breaker_.state();
    if (fleet_ != nullptr && state != BreakerState::kOpen) {
      Result<int64_t> n = fleet_->Heartbeat();
      if (n.ok()) {
        instances_.store(std::max<int64_t>(1, *n), std::memory_order_relaxed);
        Bump(heartbeats_);
      } else {
        Bump(heartbeat_failures_);
      }
    }
    if (options_.charge_back && breaker_.state() == BreakerState::kClosed) ChargeBack();
    if (!options_.background) ProbeOnce();  // with a thread, the prober does it
  }

  // Sends the ledger to the primary; on the first failure puts the rest back.
  void ChargeBack() {
    std::vector<resilient::ChargeBackLedger::Entry> entries = ledger_.TakeAll();
    size_t i = 0;
    for (; i < entries.size(); ++i) {
      if (breaker_.state() != BreakerState::kClosed) break;
      if (!ChargeOne(entries[i]).ok()) {
        Bump(charge_back_failures_);
        break;
      }
    }
    for (; i < entries.size(); ++i) {
      if (!ledger_.Add(entries[i].key, entries[i].limit, entries[i].cost))
        Bump(charge_back_dropped_, static_cast<uint64_t>(entries[i].cost));
    }
  }

  Status ChargeOne(const resilient::ChargeBackLedger::Entry& e) {
    const AcquireItem item{e.key, &e.limit, e.cost};
    if (options_.saturating_charge) {
      Status s = options_.saturating_charge(item);
      if (s.ok()) CountCharged(e.cost, 0);
      return s;
    }
    // Charge the total; when it does not fit, charge what is left, so the
    // bucket ends empty. Concurrent traffic may take tokens in between: retry.
    int64_t want = e.cost;
    for (int attempt = 0; attempt < 3 && want > 0; ++attempt) {
      const AcquireItem charge{e.key, &e.limit, want};
      Result<BatchDecision> r = primary_->Acquire(std::span<const AcquireItem>(&charge, 1));
      if (!r.ok()) return IsOutage(r.status().code()) ? r.status() : DropCharge(e.cost);
      if (r->allowed) {
        CountCharged(want, e.cost - want);
        return Status::Ok();
      }
      want = std::min(want, r->decisions.front().remaining);
    }
    CountCharged(0, e.cost);  // the bucket is empty already
    return Status::Ok();
  }

  Status DropCharge(int64_t cost) {
    CountCharged(0, cost);
    return Status::Ok();
  }

  void CountCharged(int64_t charged, int64_t forgiven) {
    Bump(charge_back_keys_);
    Bump(charge_back_tokens_, static_cast<uint64_t>(charged));
    Bump(charge_back_forgiven_, static_cast<uint64_t>(forgiven));
  }

  ResilientStoreStats Stats() const {
    ResilientStoreStats s;
    auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    s.primary_decisions = get(primary_decisions_);
    s.primary_failures = get(primary_failures_);
    s.short_circuited = get(short_circuited_);
    s.open_decisions = get(open_decisions_);
    s.closed_rejections = get(closed_rejections_);
    s.degraded_decisions = get(degraded_decisions_);
    s.degraded_allowed = get(degraded_allowed_);
    s.charge_back_pending_keys = ledger_.size();
    s.charge_back_keys = get(charge_back_keys_);
    s.charge_back_tokens = get(charge_back_tokens_);
    s.charge_back_forgiven = get(charge_back_forgiven_);
    s.charge_back_dropped = get(charge_back_dropped_);
    s.charge_back_failures = get(charge_back_failures_);
    s.deadline_expired = get(deadline_expired_);
    s.heartbeats = get(heartbeats_);
    s.settlements_lost = get(settlements_lost_);
    s.settlements_degraded = get(settlements_degraded_);
    s.heartbeat_failures = get(heartbeat_failures_);
    s.instances = instances_.load(std::memory_order_relaxed);
    s.breaker_state = breaker_.state();
    s.breaker = breaker_.counters();
    return s;
  }

  std::unique_ptr<Store> primary_;
  const std::string primary_name_;  // kept: used while primary_ is being destroyed
  std::unique_ptr<FleetRegistry> fleet_;
  const ResilientStoreOptions options_;
  CircuitBreaker breaker_;

 private:
  static Limit ProbeLimit() {
    LimitSpec spec;
    spec.rate = 1;
    spec.burst = 1;
    return *Limit::Create(spec);
  }

  CircuitBreakerOptions WrapListener(CircuitBreakerOptions b) {
    // Client calls never probe: the prober (or RunMaintenance) does.
    b.caller_probes = false;
    auto user = std::move(b.listener);
    b.listener = [this, user = std::move(user)](const BreakerTransition& t) {
      if (user) user(t);
      if (t.to == BreakerState::kOpen) {
        // Schedule the next probe (its due time is set now).
        std::lock_guard<std::mutex> lock(mu_);
        probe_wake_ = true;
        probe_cv_.notify_all();
      }
      if (t.to == BreakerState::kClosed) {
        // Charge back promptly after a recovery.
        std::lock_guard<std::mutex> lock(mu_);
        wake_ = true;
        cv_.notify_all();
      }
    };
    return b;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      RunMaintenance();
      lock.lock();
      cv_.wait_for(lock, options_.maintenance_period, [this] { return stop_ || wake_; });
      wake_ = false;
    }
  }

  // The background prober: sleeps while the breaker is closed; while it is
  // open, sends a probe each time the cool-down has passed.
  void ProbeLoop() {
    const Clock& clock = *options_.breaker.clock;
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const int64_t due = breaker_.ProbeDueNs();
      if (due == 0) {  // closed, or half-open with a probe in flight elsewhere
        probe_cv_.wait_for(lock, options_.maintenance_period,
                           [this] { return stop_ || probe_wake_; });
        probe_wake_ = false;
        continue;
      }
      if (clock.Now() < due) {
        clock.WaitUntil(lock, probe_cv_, due, [this] { return stop_; });
        continue;
      }
      lock.unlock();
      const bool probed = ProbeOnce();
      lock.lock();
      // A zero open_duration must not turn a refused connection into a busy loop.
      if (!probed || breaker_.state() != BreakerState::kClosed)
        probe_cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_; });
    }
  }

  std::unique_ptr<LocalStore> local_;
  resilient::ChargeBackLedger ledger_;
  const Limit probe_limit_;  // for the probe's zero-cost peek
  // options_.clock time of the latest answer from the primary, kept to within
  // kAnswerGrainNs (earlier by at most that, so NoAnswerSince errs towards
  // not opening), or kNeverAnswered until its first answer: a primary that
  // never answered has not answered since any call was sent.
  static constexpr int64_t kAnswerGrainNs = 100'000;
  static constexpr int64_t kNeverAnswered = std::numeric_limits<int64_t>::min();
  std::atomic<int64_t> last_answer_;
  std::atomic<int64_t> instances_;

  std::atomic<uint64_t> primary_decisions_{0}, primary_failures_{0}, short_circuited_{0};
  std::atomic<uint64_t> open_decisions_{0}, closed_rejections_{0};
  std::atomic<uint64_t> degraded_decisions_{0}, degraded_allowed_{0};
  std::atomic<uint64_t> charge_back_keys_{0}, charge_back_tokens_{0}, charge_back_forgiven_{0};
  std::atomic<uint64_t> charge_back_dropped_{0}, charge_back_failures_{0};
  std::atomic<uint64_t> heartbeats_{0}, heartbeat_failures_{0}, deadline_expired_{0};
  std::atomic<uint64_t> settlements_lost_{0}, settlements_degraded_{0};

  std::mutex mu_;  // guards stop_, wake_ and probe_wake_ (the threads' wake-ups)
  std::condition_variable cv_;
  std::condition_variable probe_cv_;
  bool stop_ = false;
  bool wake_ = false;
  bool probe_wake_ = false;
  std::thread thread_;
  std::thread prober_;
};

Result<std::unique_ptr<ResilientStore>> ResilientStore::Create(std::unique_ptr<Store> primary,
                                                               ResilientStoreOptions options) {
  if (primary == nullptr) return InvalidArgument("resilient: primary store must not be null");
  if (!(options.degrade_fraction > 0) || options.degrade_fraction > 1)
    return InvalidArgument("resilient.degrade_fraction: must be in (0, 1]");
  if (options.initial_instances < 1)
    return InvalidArgument("resilient.initial_instances: must be at least 1");
  if (options.maintenance_period <= Nanos(0))
    return InvalidArgument("resilient.maintenance_period: must be positive");
  if (options.clock == nullptr) return InvalidArgument("resilient.clock: must not be null");
  if (options.io_clock == nullptr) return InvalidArgument("resilient.io_clock: must not be null");
  if (options.call_deadline < Nanos(0))
    return InvalidArgument("resilient.call_deadline: must not be negative");
  if (options.probe_key.empty()) return InvalidArgument("resilient.probe_key: must not be empty");
  Status s = CircuitBreaker::Validate(options.breaker);
  if (!s.ok()) return s;
  LocalStoreOptions lo;
  lo.max_keys = std::max<size_t>(1024, options.local_max_keys);
  lo.shards = 16;
  lo.clock = options.clock;
  lo.overflow = OverflowPolicy::kReject;
  auto local = LocalStore::Create(lo);
  if (!local.ok()) return local.status();
  const bool background = options.background;
  auto impl = std::make_unique<Impl>(std::move(primary), std::move(options), std::move(*local));
  if (background) impl->StartThread();
  return std::unique_ptr<ResilientStore>(new ResilientStore(std::move(impl)));
}

ResilientStore::ResilientStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResilientStore::~ResilientStore() { impl_->StopThread(); }

bool ResilientStore::SupportsSettle() const { return impl_->primary_->SupportsSettle(); }

Result<std::vector<Settled>> ResilientStore::Settle(std::span<const SettleItem> items) {
  return base::CallSync<Result<std::vector<Settled>>>(
      [&](auto done) { impl_->SettleAsync(items, std::move(done)); });
}

void ResilientStore::SettleAsync(std::span<const SettleItem> items, SettleCallback done) {
  impl_->SettleAsync(items, std::move(done));
}

Result<BatchDecision> ResilientStore::Acquire(std::span<const AcquireItem> items) {
  return impl_->Acquire(items);
}

void ResilientStore::AcquireAsync(std::span<const AcquireItem> items, Callback done) {
  impl_->AcquireAsync(items, std::move(done));
}

bool ResilientStore::SupportsLeases() const { return impl_->primary_->SupportsLeases(); }

Result<LeaseDecision> ResilientStore::AcquireLease(std::string_view key, const LeaseLimit& limit) {
  return impl_->AcquireLease(key, limit);
}

Result<bool> ResilientStore::ReleaseLease(std::string_view key, std::string_view lease_id) {
  return base::CallSync<Result<bool>>(
      [&](auto done) { impl_->ReleaseLeaseAsync(key, lease_id, std::move(done)); });
}

void ResilientStore::AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit,
                                       LeaseCallback done) {
  impl_->AcquireLeaseAsync(key, limit, std::move(done));
}

void ResilientStore::ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                                       ReleaseCallback done) {
  impl_->ReleaseLeaseAsync(key, lease_id, std::move(done));
}

Status ResilientStore::ResetKey(std::string_view key, const Limit& limit) {
  return impl_->ResetKey(key, limit);
}

Result<Decision> ResilientStore::SetRemaining(std::string_view key, const Limit& limit,
                                              int64_t remaining) {
  return impl_->SetRemaining(key, limit, remaining);
}

std::string ResilientStore::Name() const { return "resilient(" + impl_->primary_name_ + ")"; }

bool ResilientStore::AsyncNative() const { return impl_->primary_->AsyncNative(); }

bool ResilientStore::Healthy() const {
  return impl_->breaker_.state() != BreakerState::kOpen ||
         impl_->options_.mode != FailureMode::kClosed;
}

Nanos ResilientStore::UnavailableFor() const {
  const int64_t due = impl_->breaker_.ProbeDueNs();
  if (due == 0) return Nanos(0);
  return Nanos(std::max<int64_t>(0, due - impl_->options_.breaker.clock->Now()));
}

void ResilientStore::RunMaintenance() { impl_->RunMaintenance(); }
ResilientStoreStats ResilientStore::Stats() const { return impl_->Stats(); }
CircuitBreaker& ResilientStore::breaker() { return impl_->breaker_; }
Store& ResilientStore::primary() { return *impl_->primary_; }

}  // namespace tollgate
