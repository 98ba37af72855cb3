// The pure rate-limit algorithms: (state, limit, cost, now) -> (state', decision).
//
// No I/O, no clock reads, no allocation. Every store applies these steps
// atomically (a CAS loop on the state word locally; the Lua script in Redis
// mirrors the same integer arithmetic).
//
// State word conventions (all algorithms but the sliding log fit in 64 bits; a
// zero word always means "never seen", which every algorithm treats as full):
//  - token / leaky bucket: TAT, the theoretical arrival time in ns: the instant
//    at which the bucket is full again ("the time it was last empty" + tolerance
//    is the GCRA view). Tokens available at `now` = (now + tolerance - max(TAT, now)) / interval.
//  - fixed window:   [window index : 40][used : 24] below 2^24 a window, else
//                    [window index : 23][used : 41] (quotas up to 2^40)
//  - sliding window: [window index mod 2^24 : 24][previous : 20][current : 20]
//
// Invariants:
//  - never over-grant: over any interval T the allowed cost is <= burst + rate*T
//    (bucket) or <= burst per window (fixed window);
//  - cost 0 is a peek: reports state, never changes it;
//  - cost > burst is never allowed and returns retry_after = Decision::kNever;
//  - a clock that steps backwards never adds tokens and never corrupts state;
//  - a rejected step leaves the state unchanged (nothing is charged).
#ifndef TOLLGATE_ALGORITHM_H_
#define TOLLGATE_ALGORITHM_H_

#include <cstdint>
#include <deque>

#include "tollgate/decision.h"
#include "tollgate/limit.h"

namespace tollgate {

struct StepResult {
  Decision decision;
  uint64_t state = 0;    // the new state word; equal to the old one when !changed
  bool changed = false;  // whether the store must write `state`
  // Monotonic ns from which this state carries no information (bucket full,
  // window over): a store may reclaim the key from then on.
  int64_t idle_at = 0;
};

// How many low bits of a fixed window's state word hold its count (24, or 41
// for quotas of 2^24 and more); the window index sits above them.
int FixedWindowCountBits(const Limit& limit);

// One decision for the word-sized algorithms (all but kSlidingLog).
StepResult Step(const Limit& limit, uint64_t state, int64_t cost, int64_t now_ns);

// A settlement of one key once a response has ended (docs/configuration.md,
// "Cost after the response" and "Refunds"): `charge` tokens charged without a
// fit check, so the key may go into debt, and `refund` tokens given back from
// the charge made at `charged_at_ns` (same clock as now).
//  - token / leaky bucket: TAT' = max(TAT, now) + (charge - refund) * interval,
//    never below now (a refund cannot fill a bucket past full) and never more
//    than kMaxDebtNs beyond now + tolerance (the debt is bounded);
//  - fixed / sliding window: the charge is counted in the current window, up to
//    MaxSettleCount; the refund only while the window holding charged_at_ns is
//    still the current one and the key's state holds it (after a roll it is a
//    no-op), and never below 0.
// The decision reports what a request of cost 1 would get now: allowed when
// the key is out of debt, else retry_after until it is.
struct SettleOp {
  int64_t charge = 0;         // >= 0, tokens
  int64_t refund = 0;         // >= 0, tokens
  int64_t charged_at_ns = 0;  // when the refunded charge was made
};
struct SettleResult {
  StepResult step;       // step.state to write when step.changed
  int64_t charged = 0;   // tokens actually charged (clamped by the debt bound)
  int64_t refunded = 0;  // tokens actually given back (0 when the window rolled)
};
inline constexpr int64_t kMaxDebtNs = int64_t{1} << 52;  // about 52 days
// The largest count a window's state may reach by settlements (its bit field,
// and the decimal digits Redis stores).
int64_t MaxSettleCount(const Limit& limit);
// kSlidingLog is not settled (a log entry per grant): the result is unchanged
// and charges nothing.
SettleResult Settle(const Limit& limit, uint64_t state, const SettleOp& op, int64_t now_ns);

// The sliding log keeps one entry per grant; bounded by burst entries.
struct SlidingLogState {
  struct Entry {
    int64_t at_ns;
    int64_t cost;
  };
  std::deque<Entry> entries;
  int64_t total = 0;  // sum of entry costs inside the window
};

// One decision for kSlidingLog; mutates `state` only when allowed (expiry of
// old entries is applied either way and does not change what the state means).
Decision StepLog(const Limit& limit, SlidingLogState& state, int64_t cost, int64_t now_ns,
                 int64_t* idle_at = nullptr);

}  // namespace tollgate

#endif  // TOLLGATE_ALGORITHM_H_
