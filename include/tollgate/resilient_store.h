// ResilientStore: a Store that keeps deciding when its primary store (Redis,
// Redis Cluster) fails, per a failure mode, behind a circuit breaker.
//
// Every batch first asks the CircuitBreaker. While it is closed the batch goes
// to the primary; an answer is passed through unchanged. When the primary fails (kTimeout,
// kConnection, kScript, kServer, kUnavailable, kInternal) or the breaker refuses the call, the
// batch is answered by the failure mode of its items:
//  - kOpen: allowed, BatchDecision::enforced = false, nothing charged anywhere,
//    no state changed (each Decision reports remaining = limit);
//  - kClosed: Status kUnavailable (the policy layer answers 503,
//    temporary-reduced-capacity, never 429);
//  - kDegrade: decided on an internal LocalStore with each limit scaled by
//    degrade_fraction / (last known instance count): burst and rate (token and
//    leaky bucket) or quota per window (window algorithms), rounded down, at
//    least 1 token. enforced stays true.
// A batch whose items have different modes: any kClosed item makes the whole
// batch kUnavailable; otherwise kDegrade items are decided locally (all or
// nothing) and kOpen items pass uncharged, and enforced is false when any item
// was kOpen and the batch was allowed. A batch the kDegrade items deny is
// enforced (allowed = false, denied_index at the degrade item): a mode that
// enforces said no, so the policy layer answers 429.
// kInvalidArgument and kOverflow from the primary are passed through (the
// caller's problem, not an outage) and count as successes for the breaker.
//
// Per-rule modes: an item's mode is its AcquireItem::failure_mode tag (the
// Enforcer sets it from the rule's failure_mode), else Options::mode. Keys
// are never parsed for it.
//
// Fleet awareness: with Options::fleet set, a maintenance thread calls
// FleetRegistry::Heartbeat() every maintenance_period while the breaker is not
// open; the live instance count it returns is the divisor used by kDegrade.
// CreateRedisFleetRegistry keeps one sorted set of instance ids scored by Redis
// TIME (ms) and counts the members seen within the TTL, through a store's
// command function (it holds no connection of its own).
//
// Charge-back (Options::charge_back, default on): every cost granted by kDegrade
// is added to a per-key ledger (bounded by max_charge_back_keys; overflow is
// counted and dropped). When the breaker closes again the maintenance thread
// charges each key's total to the primary, saturating at an empty bucket: the
// client ends at most empty (still limited), never in debt, because grants made
// early in a long outage have partly refilled since. With
// Options::saturating_charge (a store operation doing that atomically) it is
// one call; otherwise an Acquire of the total and, when that is refused,
// Acquires of whatever still fits (up to 3 tries against concurrent traffic).
// A failed charge-back is kept and retried next period.
//
// Deadlines: the per-call deadline is the primary's own (RedisOptions timeouts),
// optionally backed by Options::call_deadline;
// a hung primary costs the calls in flight at most that deadline, then the
// breaker opens and no client call waits again until Redis is back. A call
// that meets the deadline (kTimeout) while the primary answered nothing since
// the call was sent (or never answered at all) opens the breaker at once
// (BreakerReason::kNoAnswer), so a caller never waits the deadline twice while
// the consecutive-failure streak fills up (fewer callers than
// consecutive_failures). A timeout while other calls are answered (one slow
// call) only counts towards the streak.
//
// Probes: client calls are never probes (the breaker runs with
// caller_probes = false): while the breaker is open or half-open every client
// call is answered by its failure mode at once. A prober thread sends the
// probes instead, one at a time, each open_duration after the breaker opened
// (or re-opened on a failed probe): a zero-cost peek (cost 0: reads, never
// writes) on Options::probe_key through the primary, under the same deadline
// as any call. A successful probe closes the breaker; only then do client calls
// go to the primary again. Without the background thread, RunMaintenance()
// sends the probe when one is due.
//
// Thread safety: all methods are safe to call concurrently. The closed-state
// path adds one breaker Allow/Record (lock-free) to the primary call.
// Ownership: owns the primary, the breaker, the local store, the fleet registry
// and the maintenance and prober threads (joined by the destructor). Clocks are borrowed.
// The destructor destroys the primary first, so async calls it still holds
// complete (per the mode) while everything they use is alive; no new call may
// start once destruction has begun.
// Errors: as the primary's, plus kUnavailable from kClosed.
#ifndef TOLLGATE_RESILIENT_STORE_H_
#define TOLLGATE_RESILIENT_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/circuit_breaker.h"
#include "tollgate/clock.h"
#include "tollgate/store.h"

namespace tollgate {

// Tells how many instances share the limits. Called from one thread at a time.
class FleetRegistry {
 public:
  virtual ~FleetRegistry() = default;
  // Registers this instance as alive now and returns the number of live
  // instances (this one included, so >= 1), or an error.
  virtual Result<int64_t> Heartbeat() = 0;
};

struct RedisFleetOptions {
  // The sorted set holding the fleet; a {hash tag} keeps it on one Cluster slot.
  std::string key = "tollgate:{fleet}";
  std::string instance_id;             // empty: "<hostname>:<pid>:<random>"
  Nanos ttl{std::chrono::seconds(3)};  // an instance missing this long no longer counts
};

// Sends one Redis command (argv) and returns its integer reply; an error reply
// or a failed call is an error Status. Called from one thread at a time.
using FleetCommand = std::function<Result<int64_t>(std::vector<std::string> argv)>;

// A FleetRegistry on a Redis sorted set, scored by Redis TIME (ms), over a
// store's command function: RedisStore::Command, or RedisClusterStore::Command
// routed by options.key (src/runtime builds it from the store spec), so it
// shares the store's connections, AUTH, db, TLS and cluster redirections.
// `command` must stay usable until the registry is destroyed (it sends ZREM
// when it leaves, once it has registered).
Result<std::unique_ptr<FleetRegistry>> CreateRedisFleetRegistry(RedisFleetOptions options,
                                                                FleetCommand command);

struct ResilientStoreOptions {
  FailureMode mode = FailureMode::kDegrade;  // for items without a failure_mode tag

  double degrade_fraction = 0.5;  // in (0, 1]
  int64_t initial_instances = 1;  // the divisor until a heartbeat has answered
  size_t local_max_keys = size_t{1} << 18;

  bool charge_back = true;
  size_t max_charge_back_keys = size_t{1} << 17;
  // Optional: charges min(item.cost, what fits) to the primary in one atomic
  // step, leaving the bucket at worst empty. Without it, charge-back uses
  // Acquire (two or more calls, see above).
  std::function<Status(const AcquireItem& item)> saturating_charge;

  // Optional guard (0 = off): Acquire() waits at most this long for the
  // primary, through its AcquireAsync, then answers per the mode (kTimeout
  // counts as a failure). For primaries whose own deadline is not trusted;
  // useless with a primary whose AcquireAsync runs inline. AcquireAsync is not
  // guarded (the primary's callback decides when it completes). Timed on io_clock.
  Nanos call_deadline{0};

  CircuitBreakerOptions breaker;         // its clock and listener are used as given
  std::unique_ptr<FleetRegistry> fleet;  // optional

  // The bucket key the breaker's probes peek (cost 0, never written). It goes
  // through the primary like any key (RedisOptions::key_prefix applies).
  std::string probe_key =
      "tollgate\x1f"
      "breaker-probe";

  // Heartbeat + charge-back period of the maintenance thread. The thread is
  // woken at once when the breaker closes, so charge-back starts promptly.
  Nanos maintenance_period{std::chrono::seconds(1)};
  // false: no threads (no maintenance, no prober); the owner calls
  // RunMaintenance(), which then also sends the due probe (tests, embedders).
  bool background = true;
  const Clock* clock = &SystemClock::Instance();  // not owned
  // Times the waits: call_deadline (Clock::WaitUntil). Not owned. The prober
  // waits for the breaker's probe time on breaker.clock, the breaker's own.
  const Clock* io_clock = &SystemClock::Instance();
};

struct ResilientStoreStats {
  uint64_t primary_decisions = 0;   // batches answered by the primary
  uint64_t primary_failures = 0;    // primary calls that failed (probes included)
  uint64_t short_circuited = 0;     // batches the breaker kept from the primary
  uint64_t open_decisions = 0;      // batches answered by kOpen (unenforced)
  uint64_t closed_rejections = 0;   // batches refused by kClosed (503)
  uint64_t degraded_decisions = 0;  // batches decided locally by kDegrade
  uint64_t degraded_allowed = 0;
  uint64_t charge_back_pending_keys = 0;
  uint64_t charge_back_keys = 0;      // keys charged back to the primary
  uint64_t charge_back_tokens = 0;    // cost charged back
  uint64_t charge_back_forgiven = 0;  // cost that did not fit (drain mode)
  uint64_t charge_back_dropped = 0;   // cost not recorded: ledger full
  uint64_t charge_back_failures = 0;  // failed attempts (retried later)
  uint64_t deadline_expired = 0;      // calls cut short by call_deadline
  uint64_t settlements_lost = 0;      // settle items open/closed dropped (outage)
  uint64_t settlements_degraded = 0;  // settle items applied to the local store
  uint64_t heartbeats = 0;
  uint64_t heartbeat_failures = 0;
  int64_t instances = 1;  // last known instance count
  BreakerState breaker_state = BreakerState::kClosed;
  BreakerCounters breaker;
};

class ResilientStore final : public Store {
 public:
  static Result<std::unique_ptr<ResilientStore>> Create(std::unique_ptr<Store> primary,
                                                        ResilientStoreOptions options);
  ~ResilientStore() override;

  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override;
  // Goes to the primary's AcquireAsync when the breaker admits the call; the
  // items are copied first, so a failure can still be answered per the mode.
  void AcquireAsync(std::span<const AcquireItem> items, Callback done) override;

  // Leases go to the primary through the breaker; an outage is answered by
  // the store's default mode: closed 503, open admits without a lease
  // (unenforced), degrade takes a local lease at this instance's share of
  // max_in_flight (at least 1). A release goes to the local table first, then
  // the primary (not while the breaker is open: the lease then expires).
  bool SupportsLeases() const override;  // the primary's
  Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) override;
  Result<bool> ReleaseLease(std::string_view key, std::string_view lease_id) override;
  void AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit,
                         LeaseCallback done) override;
  void ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                         ReleaseCallback done) override;

  // Key administration goes to the primary (never a failure mode): while the
  // breaker is open it fails with kUnavailable and changes nothing there.
  // ResetKey also forgets the key's degraded local bucket.
  Status ResetKey(std::string_view key, const Limit& limit) override;
  Result<Decision> SetRemaining(std::string_view key, const Limit& limit,
                                int64_t remaining) override;

  std::string Name() const override;  // "resilient(<primary>)"
  bool AsyncNative() const override;  // the primary's
  // True unless the breaker is open and the default mode is kClosed.
  bool Healthy() const override;
  // While the breaker is open: the time to its next probe (0 once it is due);
  // half-open or closed: 0.
  Nanos UnavailableFor() const override;
  // Settlements go to the primary when the breaker admits them; an outage
  // answers each item by its failure mode: kOpen and kClosed drop it (the
  // request was already served: nothing to refuse; Settled::enforced false,
  // counted as settlements_lost), kDegrade applies it to the local store at
  // the degraded limit (so local decisions wait out the debt) and adds the
  // charge to the charge-back ledger (a refund stays local). Settles when the
  // primary does.
  bool SupportsSettle() const override;
  Result<std::vector<Settled>> Settle(std::span<const SettleItem> items) override;
  void SettleAsync(std::span<const SettleItem> items, SettleCallback done) override;

  // One heartbeat (when the breaker is not open) and, when it is closed, one
  // charge-back pass; with background = false, also one probe when one is due
  // (blocking up to the deadline). The background thread calls this; tests may too.
  void RunMaintenance();

  ResilientStoreStats Stats() const;
  CircuitBreaker& breaker();
  Store& primary();

  class Impl;

 private:
  explicit ResilientStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate

#endif  // TOLLGATE_RESILIENT_STORE_H_
