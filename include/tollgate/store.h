// Store: where rate-limit state lives and is changed atomically.
//
// A store owns the state of many buckets and applies core's Step() to them
// atomically: a CAS loop in LocalStore, one Lua script per batch in RedisStore.
// Every store passes the same contract suite (tests/store_contract.h).
//
// Batches are all-or-nothing: if any item is rejected, no item is charged, and
// each item's Decision then reports that item's state without a charge.
//
// Thread safety: every Store is safe to call from many threads at once.
// Ownership: items are borrowed for the duration of the call only; async
// stores copy what they need before AcquireAsync returns.
// Errors: a Status (kTimeout, kConnection, kScript, kServer, kUnavailable,
// kInvalidArgument); a store never throws on the request path.
#ifndef TOLLGATE_STORE_H_
#define TOLLGATE_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/decision.h"
#include "tollgate/failure_mode.h"
#include "tollgate/lease.h"
#include "tollgate/limit.h"
#include "tollgate/status.h"

namespace tollgate {

struct AcquireItem {
  std::string_view key;  // the full bucket key: rule name + identity (see KeyBuilder)
  const Limit* limit;    // never null
  int64_t cost;          // >= 0; 0 peeks
  // The item's failure mode, a tag its producer sets (the Enforcer: from the
  // rule's failure_mode); empty: the store's default. Stores that cannot fail
  // ignore it; no store reads it from the key.
  std::optional<FailureMode> failure_mode = std::nullopt;
};

struct BatchDecision {
  bool allowed = false;             // every item fitted, so every item was charged
  bool enforced = true;             // false when a failure mode answered without state
  int denied_index = -1;            // the first item that did not fit, or -1
  std::vector<Decision> decisions;  // one per item, in order
};

// One key's settlement after a response (Store::Settle; the arithmetic is
// core's Settle, include/tollgate/algorithm.h): `charge` tokens without a fit
// check (the key may go into debt) and `refund` tokens of the charge made `age`
// ago (a no-op once the window that charge went into has rolled).
struct SettleItem {
  std::string_view key;  // the bucket key, as in AcquireItem
  const Limit* limit;    // never null
  int64_t charge = 0;    // >= 0
  int64_t refund = 0;    // >= 0
  Nanos age{0};          // >= 0: since the charge `refund` gives back
  std::optional<FailureMode> failure_mode = std::nullopt;  // as in AcquireItem
};

// What a settlement did to one key.
struct Settled {
  int64_t charged = 0;   // tokens charged (less than asked only at the debt bound)
  int64_t refunded = 0;  // tokens given back (0 when the window rolled or nothing was left)
  bool enforced = true;  // false when a failure mode answered without the store
  Decision decision;     // the key now, for a request of cost 1 (see core's Settle)
};

class Store {
 public:
  using Callback = std::function<void(Result<BatchDecision>)>;

  virtual ~Store() = default;

  // Decides `items` together, blocking until done.
  virtual Result<BatchDecision> Acquire(std::span<const AcquireItem> items) = 0;

  // Decides `items` together; `done` runs exactly once, either inline or on a
  // store thread, and must not block. The default runs Acquire() inline.
  virtual void AcquireAsync(std::span<const AcquireItem> items, Callback done) {
    done(Acquire(items));
  }

  // Key administration (tollgated's /v1/keys/*, `tollgate key`): one key's
  // state under the limit it is decided with. To look at a key, peek it
  // (cost 0, InspectKey below). Both calls are atomic against concurrent
  // decisions on the key; a store without them answers kInvalidArgument.
  //
  // Forgets `key`'s state: the next decision finds a full bucket or an empty
  // window, exactly as for a key never seen. Forgetting an absent key is ok.
  virtual Status ResetKey(std::string_view key, const Limit& limit) {
    (void)key;
    (void)limit;
    return InvalidArgument("store " + Name() + " cannot reset keys");
  }
  // Leaves exactly `remaining` whole tokens (0..limit.burst(), else
  // kInvalidArgument) in `key` now: its state is forgotten and then charged
  // burst - remaining, in one atomic step. Returns the key's state afterwards
  // (Decision::remaining == remaining, reset_after until it is full again).
  virtual Result<Decision> SetRemaining(std::string_view key, const Limit& limit,
                                        int64_t remaining) {
    (void)key;
    (void)limit;
    (void)remaining;
    return InvalidArgument("store " + Name() + " cannot set keys");
  }

  // "local", "redis", "redis-cluster", "resilient(redis)"...
  // For display only: callers choose behaviour by capability (AsyncNative), never by name.
  virtual std::string Name() const = 0;

  // Whether AcquireAsync is natively asynchronous: it hands the batch to the
  // store's own I/O and returns without waiting (a remote store). Front ends on
  // an event loop call AcquireAsync when true, so the loop never waits on the
  // network, and Acquire inline when false (an in-memory store answers in
  // nanoseconds; going through AcquireAsync would only add a hop).
  virtual bool AsyncNative() const { return false; }

  // Whether the store can currently decide (for /readyz). Cheap, non-blocking.
  virtual bool Healthy() const { return true; }

  // How long until the store may decide again after refusing calls: a circuit
  // breaker's time to its next probe. Zero when unknown or not refusing (the
  // policy layer then tells clients 1 s). Cheap, non-blocking.
  virtual Nanos UnavailableFor() const { return Nanos(0); }

  // Concurrency limits (see lease.h). A store that holds leases overrides all
  // three; the defaults refuse with kInvalidArgument, so a policy that asks a
  // store without leases for one fails loudly instead of admitting unlimited.
  virtual bool SupportsLeases() const { return false; }
  // Admits when fewer than limit.max_in_flight() leases on `key` are live,
  // recording a new one that expires limit.lease_ns() from now.
  virtual Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) {
    (void)key;
    (void)limit;
    return InvalidArgument("store " + Name() + " does not hold concurrency leases");
  }
  // Ends lease `lease_id` on `key`: true if it was live, false if it was
  // unknown or had expired already (a no-op). kInvalidArgument for an id
  // ValidLeaseId() refuses.
  virtual Result<bool> ReleaseLease(std::string_view key, std::string_view lease_id) {
    (void)key;
    (void)lease_id;
    return InvalidArgument("store " + Name() + " does not hold concurrency leases");
  }
  // The same without blocking: `done` runs exactly once, inline or on a store
  // thread, and must not block. `key` and `lease_id` are copied before the call
  // returns. The defaults run the blocking calls inline (an in-memory store);
  // a remote store (AsyncNative) overrides them.
  using LeaseCallback = std::function<void(Result<LeaseDecision>)>;
  using ReleaseCallback = std::function<void(Result<bool>)>;
  virtual void AcquireLeaseAsync(std::string_view key, const LeaseLimit& limit,
                                 LeaseCallback done) {
    done(AcquireLease(key, limit));
  }
  virtual void ReleaseLeaseAsync(std::string_view key, std::string_view lease_id,
                                 ReleaseCallback done) {
    done(ReleaseLease(key, lease_id));
  }

  // Settlements (cost after the response, refunds). Each item is applied
  // atomically on its own key; items are independent (a settlement never
  // fails for lack of tokens). A store that settles overrides SupportsSettle
  // and Settle; the default refuses with kInvalidArgument, so a policy that
  // needs settlements fails loudly at load. sliding_log limits are refused.
  using SettleCallback = std::function<void(Result<std::vector<Settled>>)>;
  virtual bool SupportsSettle() const { return false; }
  virtual Result<std::vector<Settled>> Settle(std::span<const SettleItem> items) {
    (void)items;
    return InvalidArgument("store " + Name() + " does not settle costs after the response");
  }
  // The same without blocking: `done` runs exactly once, inline or on a store
  // thread, and must not block; items are copied before the call returns. The
  // default runs Settle inline (an in-memory store).
  virtual void SettleAsync(std::span<const SettleItem> items, SettleCallback done) {
    done(Settle(items));
  }
};

// Decides a single item through a store: convenience for callers without batches.
inline Result<Decision> AcquireOne(Store& store, std::string_view key, const Limit& limit,
                                   int64_t cost) {
  AcquireItem item{key, &limit, cost};
  auto r = store.Acquire(std::span<const AcquireItem>(&item, 1));
  if (!r.ok()) return r.status();
  return r->decisions.front();
}

// One key's current state without charging it (a cost-0 peek): remaining,
// limit and reset_after as a decision would report them.
inline Result<Decision> InspectKey(Store& store, std::string_view key, const Limit& limit) {
  return AcquireOne(store, key, limit, 0);
}

// kInvalidArgument unless 0 <= remaining <= limit.burst(): SetRemaining's bound,
// checked by every store (and by callers that want the message first).
inline Status CheckRemaining(const Limit& limit, int64_t remaining) {
  if (remaining < 0 || remaining > limit.burst()) {
    return InvalidArgument("remaining: must be 0.." + std::to_string(limit.burst()) + " (got " +
                           std::to_string(remaining) + ")");
  }
  return Status();
}

}  // namespace tollgate

#endif  // TOLLGATE_STORE_H_
