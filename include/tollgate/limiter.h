// Limiter: one rate limit applied per key, for code that calls it directly.
//
//   auto limiter = tollgate::Limiter::Create({.limit = {.rate = 100, .burst = 200}});
//   if (!(*limiter)->TryAcquire(user_id)) return Reject();
//
// A Limiter pairs one Limit with a Store: a LocalStore it creates and owns by
// default (nanoseconds per decision, state in this process), or any Store you
// pass (RedisStore for state shared between processes, a ResilientStore around
// it). Several Limiters may share one Store; each uses its own key space
// (`name` + "/" + key), so different limits never share a bucket.
//
//   Acquire(key, cost)       decides now, charges when allowed; store errors are values
//   AcquireAsync(key, cost)  the same through Store::AcquireAsync (a Redis store does not
//                            block the caller)
//   TryAcquire(key, cost)    bool: allowed or not; store errors count as "not allowed"
//   WaitAcquire(key, cost)   shaping: waits until the cost fits (or the leaky-bucket
//                            shaper's delay has passed), bounded by max_wait
//
// Costs are whole tokens, >= 0 (0 peeks: reports the state, charges nothing). A
// cost above the limit's burst can never be granted: retry_after is Decision::kNever
// and WaitAcquire returns at once.
//
// Time: decisions on a LocalStore read the store's clock (LocalStoreOptions::clock);
// WaitAcquire measures its budget with LimiterOptions::clock and waits through
// LimiterOptions::waiter, so tests inject a ManualClock and a waiter that
// advances it: no test has to sleep.
//
// Thread safety: every method may be called from many threads at once (the
// Limiter is immutable after Create; the Store is thread-safe). The Waiter must
// be thread-safe too when WaitAcquire is called concurrently.
// Ownership: the Limiter shares ownership of its Store (shared_ptr). The clock
// and waiter are borrowed and must outlive the Limiter. An AcquireAsync callback
// may run after the call returns (on a store thread): the Limiter must outlive it.
// Errors: Create() returns kInvalidArgument for a bad limit (naming the field) or
// a limit the store cannot decide; the decision calls return the store's Status
// (kTimeout, kConnection, kUnavailable, ...). Nothing throws.
#ifndef TOLLGATE_LIMITER_H_
#define TOLLGATE_LIMITER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/decision.h"
#include "tollgate/limit.h"
#include "tollgate/local_store.h"
#include "tollgate/status.h"
#include "tollgate/store.h"
#include "tollgate/store_spec.h"  // MakeStore(url): a store from a URL

namespace tollgate {

// How WaitAcquire waits. The default sleeps on the real clock; tests pass one
// that advances a ManualClock instead.
class Waiter {
 public:
  virtual ~Waiter() = default;
  // Blocks the calling thread for `d` (> 0). Must be thread-safe.
  virtual void Wait(Nanos d) = 0;
};

// Sleeps with std::this_thread::sleep_for.
class SleepWaiter final : public Waiter {
 public:
  void Wait(Nanos d) override;
  static SleepWaiter& Instance();  // stateless, so sharing it is not a mutable global
};

struct LimiterOptions {
  LimitSpec limit = {};                    // validated by Create(); rate + burst for a token bucket
  std::string name = "limiter";            // key-space prefix: "<name>/<key>"; no '/' allowed in it
  std::shared_ptr<Store> store = nullptr;  // null: a LocalStore is created from `local`
  LocalStoreOptions local = {};            // used only when `store` is null
  Nanos max_wait = std::chrono::seconds(1);       // WaitAcquire's default budget
  const Clock* clock = &SystemClock::Instance();  // WaitAcquire's budget clock; not owned
  Waiter* waiter = &SleepWaiter::Instance();      // how WaitAcquire waits; not owned
};

class Limiter {
 public:
  static Result<std::unique_ptr<Limiter>> Create(LimiterOptions options);

  // Decides `cost` for `key` now; charges it when allowed.
  Result<Decision> Acquire(std::string_view key, int64_t cost = 1);

  // The same, asynchronously: `done` runs exactly once, inline (local store) or on
  // the store's thread (Redis); it must not block.
  void AcquireAsync(std::string_view key, int64_t cost, std::function<void(Result<Decision>)> done);

  // True when `cost` was granted (and charged). `decision`, if given, receives the
  // decision; on a store error it is left untouched and `error` (if given) is set.
  bool TryAcquire(std::string_view key, int64_t cost = 1, Decision* decision = nullptr,
                  Status* error = nullptr);

  // Shaping: returns once `cost` has been granted and any shaper delay has passed,
  // or gives up, without waiting in vain, as soon as the wait would exceed
  // `max_wait` (measured from the call on options.clock) or the cost can never fit.
  // The result's `allowed` says which. Rejected attempts charge nothing. A
  // leaky-bucket shaper's grant is charged when made and its delay is always
  // waited out in full (it is bounded by the limit's max_delay, not by max_wait).
  Result<Decision> WaitAcquire(std::string_view key, int64_t cost, Nanos max_wait);
  Result<Decision> WaitAcquire(std::string_view key, int64_t cost = 1) {
    return WaitAcquire(key, cost, options_.max_wait);
  }

  const Limit& limit() const { return limit_; }
  Store& store() const { return *store_; }
  // The store key used for `key`: "<name>/<key>".
  std::string StoreKey(std::string_view key) const;

 private:
  Limiter(LimiterOptions options, Limit limit, std::shared_ptr<Store> store, LocalStore* local);

  const LimiterOptions options_;
  const Limit limit_;
  const std::shared_ptr<Store> store_;
  LocalStore* const local_;  // store_ when it is a LocalStore: the allocation-free path
};

}  // namespace tollgate

#endif  // TOLLGATE_LIMITER_H_
