// The token bucket step (GCRA form), inlined into the local store's hot path.
//
// Step() in src/core is a call into another translation unit that dispatches
// on the algorithm and returns a 72-byte StepResult through memory; on a hot
// key that is a third of a decision. This is the same integer arithmetic as
// core's TokenBucketStep, written so the compiler can keep it in registers.
// tests/local/gcra_step_test.cc holds the two equal over random and edge
// inputs, so a change to one that is not made to the other fails the build's
// tests.
#ifndef TOLLGATE_SRC_LOCAL_GCRA_STEP_H_
#define TOLLGATE_SRC_LOCAL_GCRA_STEP_H_

#include <algorithm>
#include <cstdint>

#include "tollgate/algorithm.h"
#include "tollgate/limit.h"

namespace tollgate::internal {

// Whether Step(limit, ...) is the token bucket step: a token bucket, or a
// leaky bucket used as a meter (no queueing delay).
inline bool IsGcra(const Limit& limit) {
  return limit.algorithm() == Algorithm::kTokenBucket ||
         (limit.algorithm() == Algorithm::kLeakyBucket && limit.max_delay_ns() <= 0);
}

// The charging case of GcraStep, split in two so a store can CAS between
// them: true when 0 < cost <= burst and the cost fits, with the new state
// (TAT) in *tat_after; false when GcraStep would not change the state.
inline bool GcraCharge(const Limit& limit, uint64_t state, int64_t cost, int64_t now,
                       int64_t* tat_after) {
  if (cost <= 0 || cost > limit.burst()) [[unlikely]] {
    return false;
  }
  *tat_after = std::max(static_cast<int64_t>(state), now) + limit.IncrementFor(cost);
  return *tat_after - now <= limit.tolerance_ns();
}

// GcraStep(...).decision when GcraCharge(...) returned true.
inline Decision GcraAllowed(const Limit& limit, int64_t tat_after, int64_t now) {
  Decision d;
  d.allowed = true;
  d.limit = limit.burst();
  d.remaining = std::min(limit.burst(), limit.TokensIn(now + limit.tolerance_ns() - tat_after));
  d.reset_after = Nanos(std::max<int64_t>(tat_after - now, 0));
  return d;
}

// Step(limit, state, cost, now) for IsGcra(limit); `cost` >= 0.
inline StepResult GcraStep(const Limit& limit, uint64_t state, int64_t cost, int64_t now) {
  const int64_t tol = limit.tolerance_ns();
  const int64_t base = std::max(static_cast<int64_t>(state), now);
  StepResult r;
  r.state = state;
  r.decision.limit = limit.burst();
  int64_t tat_after = base;
  if (cost > limit.burst()) [[unlikely]] {
    r.decision.retry_after = Decision::kNever;
  } else if (cost <= 0) [[unlikely]] {
    r.decision.allowed = true;
  } else {
    const int64_t next = base + limit.IncrementFor(cost);
    if (next - now <= tol) [[likely]] {
      r.decision.allowed = true;
      r.state = static_cast<uint64_t>(next);
      r.changed = true;
      tat_after = next;
    } else {
      r.decision.retry_after = Nanos(next - tol - now);
    }
  }
  r.decision.remaining = std::min(limit.burst(), limit.TokensIn(now + tol - tat_after));
  r.decision.reset_after = Nanos(std::max<int64_t>(tat_after - now, 0));
  r.idle_at = tat_after;
  return r;
}

}  // namespace tollgate::internal

#endif  // TOLLGATE_SRC_LOCAL_GCRA_STEP_H_
