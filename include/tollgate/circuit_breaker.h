// CircuitBreaker: stops callers from waiting on a store that is failing.
//
// Three states:
//  - closed: every call goes to the store. The breaker opens when
//    `consecutive_failures` calls in a row fail, or when, over the sliding
//    `window`, at least `min_calls` calls were seen and the share that failed
//    is >= `failure_ratio`, or at once when the caller reports a hung store
//    with RecordNoAnswer();
//  - open: no call goes to the store (Allow() answers kRejected at once) until
//    `open_duration` has passed since it opened;
//  - half-open: at most `half_open_probes` calls at a time are let through as
//    probes; the first successful probe closes the breaker (and forgets the
//    failures it saw before), a failed probe opens it again for another
//    `open_duration`. Calls beyond the probe budget are rejected.
//
// Who probes: by default (caller_probes = true) Allow() hands out the probes,
// so a probe is a real call. With caller_probes = false, Allow() never admits
// a call while the breaker is open or half-open; an owner that probes on its
// own (ResilientStore's background prober) asks TryProbe() for a probe permit
// when ProbeDueNs() has passed, and reports it with Record() as usual.
//
// Usage: every call asks `Permit p = breaker.Allow();`, goes to the store only
// when `p.admitted()`, and reports the outcome with `breaker.Record(p, ok)`.
// A permit handed out in an earlier state (a slow call that finishes after the
// breaker opened) is counted but can never move the breaker: only probes of the
// current half-open period close or re-open it.
//
// Time comes from the injected Clock (monotonic ns), so tests drive it by hand.
//
// Thread safety: all methods are safe to call concurrently. The hot path
// (closed state: Allow, then Record of a success) is lock-free: one atomic load
// for Allow, and for Record a relaxed load of the failure streak plus one
// atomic add into the current window bucket. Transitions take a mutex (they are
// rare) and call the listener with it held, so listeners see transitions one
// at a time and in order; a listener must be quick, must not block and must not
// call back into the breaker.
//
// Invariants: the state word packs (generation, probes in flight, state); each
// transition bumps the generation, so a permit knows which period issued it.
// The sliding window is kBuckets time buckets; under concurrent bucket
// rollover a few counts may be lost (the ratio is approximate, never the
// consecutive-failure count).
#ifndef TOLLGATE_CIRCUIT_BREAKER_H_
#define TOLLGATE_CIRCUIT_BREAKER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

#include "tollgate/clock.h"
#include "tollgate/status.h"

namespace tollgate {

enum class BreakerState : uint8_t { kClosed = 0, kOpen = 1, kHalfOpen = 2 };

// Why a transition happened.
enum class BreakerReason : uint8_t {
  kConsecutiveFailures = 0,  // closed -> open
  kFailureRatio = 1,         // closed -> open
  kCooldownElapsed = 2,      // open -> half-open
  kProbeSucceeded = 3,       // half-open -> closed
  kProbeFailed = 4,          // half-open -> open
  kForced = 5,               // Reset() / ForceOpen() by an operator or a test
  kNoAnswer = 6,             // closed -> open: RecordNoAnswer()
};

std::string_view BreakerStateName(BreakerState s);    // "closed", "open", "half_open"
std::string_view BreakerReasonName(BreakerReason r);  // "consecutive_failures", ...

struct BreakerTransition {
  BreakerState from;
  BreakerState to;
  BreakerReason reason;
  int64_t at_ns;  // Clock::Now() when it happened
};

struct CircuitBreakerOptions {
  int consecutive_failures = 5;  // >= 1
  double failure_ratio = 0.5;    // in (0, 1]; > 1 disables the ratio rule
  int min_calls = 20;            // calls in the window before the ratio counts
  Nanos window{std::chrono::seconds(10)};
  Nanos open_duration{std::chrono::milliseconds(250)};  // cool-down before probing
  int half_open_probes = 1;                             // probes in flight at once, 1..65535
  // false: Allow() rejects every call while not closed; probes come only from TryProbe().
  bool caller_probes = true;
  const Clock* clock = &SystemClock::Instance();  // not owned; must outlive the breaker
  // Called once per transition, with the transition mutex held.
  std::function<void(const BreakerTransition&)> listener;
};

// Monotonic counters, for metrics.
struct BreakerCounters {
  uint64_t opened = 0;       // transitions into open (from closed or half-open)
  uint64_t half_opened = 0;  // transitions into half-open
  uint64_t closed = 0;       // transitions into closed (probe success or Reset)
  uint64_t opened_by_consecutive = 0;
  uint64_t opened_by_ratio = 0;
  uint64_t opened_by_probe = 0;
  uint64_t opened_by_no_answer = 0;
  uint64_t rejected = 0;  // calls refused without trying the store
  uint64_t probes = 0;    // probe permits handed out
  uint64_t failures = 0;  // failed calls reported (any state)
};

class CircuitBreaker {
 public:
  class Permit {
   public:
    enum class Kind : uint8_t { kRejected, kNormal, kProbe };
    Permit() = default;
    bool admitted() const { return kind_ != Kind::kRejected; }
    bool probe() const { return kind_ == Kind::kProbe; }
    Kind kind() const { return kind_; }

   private:
    friend class CircuitBreaker;
    Permit(Kind kind, uint64_t generation) : kind_(kind), generation_(generation) {}
    Kind kind_ = Kind::kRejected;
    uint64_t generation_ = 0;
  };

  // kInvalidArgument when an option is out of range.
  static Status Validate(const CircuitBreakerOptions& options);
  // Options must be valid (asserted); call Validate() first for untrusted config.
  explicit CircuitBreaker(CircuitBreakerOptions options);
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // Whether this call may go to the store. Never blocks on the store.
  Permit Allow();
  // The outcome of a call admitted by Allow() or TryProbe(). Rejected permits are ignored.
  void Record(const Permit& permit, bool success);

  // A failed call after which the caller knows the store is hung (it met its
  // deadline and the store answered nothing since it was sent): recorded as a
  // failure, and a permit of the current closed period opens the breaker at
  // once (reason kNoAnswer) instead of waiting for the failure streak.
  void RecordNoAnswer(const Permit& permit);

  // A probe permit when one may be sent now: the breaker is open and its
  // cool-down has passed (it becomes half-open), or it is half-open with room
  // in the probe budget. Rejected otherwise (closed included). Works whatever
  // caller_probes says; counted in `probes`, not in `rejected`.
  Permit TryProbe();
  // Clock time from which TryProbe() can hand out a probe while open; 0 when
  // the breaker is not open.
  int64_t ProbeDueNs() const;

  BreakerState state() const;
  BreakerCounters counters() const;

  // Operator/test controls: go to closed (forgetting failures) or open now.
  void Reset();
  void ForceOpen();

 private:
  static constexpr int kBuckets = 10;
  struct Bucket {
    std::atomic<int64_t> epoch{-1};
    std::atomic<uint32_t> successes{0};
    std::atomic<uint32_t> failures{0};
  };

  Bucket& CurrentBucket(int64_t now);
  bool RatioExceeded(int64_t now) const;
  void ClearWindow();
  // Moves from (generation, from) to `to` if the breaker is still there.
  bool Transition(uint64_t generation, BreakerState from, BreakerState to, BreakerReason reason);
  void TransitionLocked(uint64_t word, BreakerState to, BreakerReason reason, int64_t now);

  const CircuitBreakerOptions options_;
  const int64_t bucket_ns_;

  std::atomic<uint64_t> word_;           // generation << 18 | probes << 2 | state
  std::atomic<int64_t> open_until_{0};   // written under mu_ before the word
  std::atomic<int32_t> consecutive_{0};  // failures in a row in the closed state
  std::array<Bucket, kBuckets> buckets_;
  std::mutex mu_;  // serialises transitions and listener calls

  std::atomic<uint64_t> opened_{0}, half_opened_{0}, closed_{0};
  std::atomic<uint64_t> by_consecutive_{0}, by_ratio_{0}, by_probe_{0}, by_no_answer_{0};
  std::atomic<uint64_t> rejected_{0}, probes_{0}, failures_{0};
};

}  // namespace tollgate

#endif  // TOLLGATE_CIRCUIT_BREAKER_H_
