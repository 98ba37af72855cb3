#include "tollgate/algorithm.h"

#include <algorithm>

namespace tollgate {
namespace {

using i128 = __int128;

Nanos Ns(int64_t v) { return Nanos(v < 0 ? 0 : v); }

// Token bucket, GCRA form. TAT = the instant the bucket is full again.
StepResult TokenBucketStep(const Limit& limit, uint64_t state, int64_t cost, int64_t now) {
  const int64_t tol = limit.tolerance_ns();
  const int64_t tat = static_cast<int64_t>(state);
  const int64_t base = std::max(tat, now);
  StepResult r;
  r.state = state;
  r.decision.limit = limit.burst();
  int64_t tat_after = base;
  if (cost > limit.burst()) {
    r.decision.retry_after = Decision::kNever;
  } else if (cost <= 0) {
    r.decision.allowed = true;
  } else {
    const int64_t next = base + limit.IncrementFor(cost);
    if (next - now <= tol) {
      r.decision.allowed = true;
      r.state = static_cast<uint64_t>(next);
      r.changed = true;
      tat_after = next;
    } else {
      r.decision.retry_after = Nanos(next - tol - now);
    }
  }
  r.decision.remaining = std::min(limit.burst(), limit.TokensIn(now + tol - tat_after));
  r.decision.reset_after = Ns(tat_after - now);
  r.idle_at = tat_after;
  return r;
}

// Leaky bucket as a shaper: a request is scheduled at max(TAT, now); it may
// proceed after `delay` as long as delay <= max_delay.
StepResult ShaperStep(const Limit& limit, uint64_t state, int64_t cost, int64_t now) {
  const int64_t max_delay = limit.max_delay_ns();
  const int64_t tat = static_cast<int64_t>(state);
  const int64_t base = std::max(tat, now);
  StepResult r;
  r.state = state;
  r.decision.limit = limit.burst();
  int64_t tat_after = base;
  if (cost > limit.burst()) {
    r.decision.retry_after = Decision::kNever;
  } else if (cost <= 0) {
    r.decision.allowed = true;
  } else if (base - now <= max_delay) {
    r.decision.allowed = true;
    r.decision.delay = Nanos(base - now);
    tat_after = base + limit.IncrementFor(cost);
    r.state = static_cast<uint64_t>(tat_after);
    r.changed = true;
  } else {
    r.decision.retry_after = Nanos(base - now - max_delay);
  }
  // Requests of cost 1 that could still be queued now.
  const int64_t slack = now + max_delay - std::max(tat_after, now);
  r.decision.remaining = slack < 0 ? 0 : std::min(limit.burst(), limit.TokensIn(slack) + 1);
  r.decision.reset_after = Ns(tat_after - now);
  r.idle_at = tat_after;
  return r;
}

// Fixed window words: [index mod 2^40 : 40][used : 24] for quotas below 2^24,
// [index mod 2^23 : 23][used : 41] for the larger ones (up to 2^40). The
// split depends only on the limit, which a key keeps.
struct FixedLayout {
  int count_bits;
  uint64_t count_mask;
  int64_t index_mod;
};

constexpr FixedLayout kNarrowFixed = {24, (uint64_t{1} << 24) - 1, int64_t{1} << 40};
constexpr FixedLayout kWideFixed = {41, (uint64_t{1} << 41) - 1, int64_t{1} << 23};

const FixedLayout& FixedLayoutFor(const Limit& limit) {
  return limit.burst() < (int64_t{1} << 24) ? kNarrowFixed : kWideFixed;
}

StepResult FixedWindowStep(const Limit& limit, uint64_t state, int64_t cost, int64_t now) {
  const FixedLayout& layout = FixedLayoutFor(limit);
  const int64_t w = limit.window_ns();
  const int64_t t = std::max<int64_t>(now, 0);
  const Calendar* calendar = limit.calendar();
  Calendar::Window cw;
  if (calendar != nullptr) cw = calendar->At(t);
  int64_t idx = calendar != nullptr ? cw.index : t / w;
  int64_t used = 0;
  if (state != 0) {
    // The word keeps the index modulo (epoch ns over a 1 ms window exceed
    // 2^40): compare modulo, as the sliding window does.
    const int64_t stored = static_cast<int64_t>(state >> layout.count_bits);
    const int64_t ahead = (idx - stored) & (layout.index_mod - 1);  // windows since stored
    // A clock that stepped back stays in the window it has counts for.
    if (ahead == 0 || ahead >= layout.index_mod / 2) {
      if (ahead != 0) {
        idx += layout.index_mod - ahead;
        if (calendar != nullptr) cw = calendar->ByIndex(idx);
      }
      used = static_cast<int64_t>(state & layout.count_mask);
    }
  }
  StepResult r;
  r.state = state;
  r.decision.limit = limit.burst();
  const int64_t window_end = calendar != nullptr ? cw.end_ns : (idx + 1) * w;
  if (cost > limit.burst()) {
    r.decision.retry_after = Decision::kNever;
  } else if (used + cost <= limit.burst()) {
    r.decision.allowed = true;
    if (cost > 0) {
      used += cost;
      r.state = (static_cast<uint64_t>(idx & (layout.index_mod - 1)) << layout.count_bits) |
                static_cast<uint64_t>(used);
      r.changed = true;
    }
  } else {
    r.decision.retry_after = Ns(window_end - now);
  }
  r.decision.remaining = std::max<int64_t>(0, limit.burst() - used);  // settled debt: < 0
  r.decision.reset_after = Ns(window_end - now);
  r.idle_at = window_end;
  return r;
}

constexpr int kSlidingCountBits = 20;
constexpr uint64_t kSlidingCountMask = (uint64_t{1} << kSlidingCountBits) - 1;
constexpr int64_t kSlidingIndexMod = int64_t{1} << 24;

StepResult SlidingWindowStep(const Limit& limit, uint64_t state, int64_t cost, int64_t now) {
  const int64_t w = limit.window_ns();
  const int64_t burst = limit.burst();
  int64_t t = std::max<int64_t>(now, 0);
  int64_t cur = t / w;
  int64_t prev = 0, curr = 0;
  if (state != 0) {
    const int64_t stored24 = static_cast<int64_t>(state >> (2 * kSlidingCountBits));
    const int64_t ahead = (cur - stored24) & (kSlidingIndexMod - 1);  // windows since stored
    int64_t sprev = static_cast<int64_t>((state >> kSlidingCountBits) & kSlidingCountMask);
    int64_t scurr = static_cast<int64_t>(state & kSlidingCountMask);
    if (ahead >= kSlidingIndexMod / 2) {
      // The stored window lies ahead: the clock stepped back. Stay in it.
      cur = cur + (kSlidingIndexMod - ahead);
      t = cur * w;
      prev = sprev;
      curr = scurr;
    } else if (ahead == 0) {
      prev = sprev;
      curr = scurr;
    } else if (ahead == 1) {
      prev = scurr;
    }
  }
  const int64_t elapsed = t - cur * w;  // in [0, w)
  // Estimated use, scaled by w: prev * (w - elapsed) + curr * w.
  const i128 used_scaled = static_cast<i128>(prev) * (w - elapsed) + static_cast<i128>(curr) * w;
  StepResult r;
  r.state = state;
  r.decision.limit = burst;
  auto pack = [&](int64_t p, int64_t c) {
    return (static_cast<uint64_t>(cur & (kSlidingIndexMod - 1)) << (2 * kSlidingCountBits)) |
           (static_cast<uint64_t>(p) << kSlidingCountBits) | static_cast<uint64_t>(c);
  };
  if (cost > burst) {
    r.decision.retry_after = Decision::kNever;
  } else if (used_scaled + static_cast<i128>(cost) * w <= static_cast<i128>(burst) * w) {
    r.decision.allowed = true;
    if (cost > 0) {
      curr += cost;
      r.state = pack(prev, curr);
      r.changed = true;
    }
  } else {
    // Wait until the previous window's weight has decayed enough, in this
    // window or, if that cannot suffice, in the next one (where prev' = curr).
    const int64_t room = burst - curr - cost;  // room left for prev's weighted share
    int64_t wait;
    if (room >= 0 && prev > 0) {
      // need prev * (w - e) <= room * w  =>  e >= w - room * w / prev
      const i128 e_needed = w - (static_cast<i128>(room) * w) / prev;
      wait = static_cast<int64_t>(e_needed) - elapsed;
    } else {
      const int64_t next_room = burst - cost;  // in the next window, curr' = 0, prev' = curr
      int64_t e2 = 0;
      if (curr > 0) e2 = static_cast<int64_t>(w - (static_cast<i128>(next_room) * w) / curr);
      wait = (w - elapsed) + e2;
    }
    // wait counts from t; after a backward step t lies ahead of now.
    wait = std::max<int64_t>(wait, 1);
    int64_t behind;
    if (__builtin_sub_overflow(t, now, &behind) || __builtin_add_overflow(wait, behind, &wait)) {
      wait = INT64_MAX;
    }
    r.decision.retry_after = Ns(wait);
  }
  const int64_t c_after = curr;
  const i128 est_scaled = static_cast<i128>(prev) * (w - elapsed) + static_cast<i128>(c_after) * w;
  const int64_t est = static_cast<int64_t>((est_scaled + w - 1) / w);
  r.decision.remaining = std::max<int64_t>(0, burst - est);
  // Estimated use reaches 0 at the end of the next window if this one has
  // counts, else at the end of this one.
  const int64_t idle = c_after > 0 ? (cur + 2) * w : (prev > 0 ? (cur + 1) * w : t);
  r.decision.reset_after = Ns(idle - now);
  r.idle_at = idle;
  return r;
}

}  // namespace

int FixedWindowCountBits(const Limit& limit) { return FixedLayoutFor(limit).count_bits; }

StepResult Step(const Limit& limit, uint64_t state, int64_t cost, int64_t now_ns) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return TokenBucketStep(limit, state, cost, now_ns);
    case Algorithm::kLeakyBucket:
      return limit.max_delay_ns() > 0 ? ShaperStep(limit, state, cost, now_ns)
                                      : TokenBucketStep(limit, state, cost, now_ns);
    case Algorithm::kFixedWindow:
      return FixedWindowStep(limit, state, cost, now_ns);
    case Algorithm::kSlidingWindow:
      return SlidingWindowStep(limit, state, cost, now_ns);
    case Algorithm::kSlidingLog:
      break;  // not word-sized: use StepLog
  }
  StepResult r;
  r.state = state;
  r.decision.limit = limit.burst();
  r.decision.retry_after = Decision::kNever;
  return r;
}

Decision StepLog(const Limit& limit, SlidingLogState& s, int64_t cost, int64_t now_ns,
                 int64_t* idle_at) {
  const int64_t w = limit.window_ns();
  // Entries stay ordered even if the clock steps back.
  const int64_t now = s.entries.empty() ? now_ns : std::max(now_ns, s.entries.back().at_ns);
  while (!s.entries.empty() && s.entries.front().at_ns <= now - w) {
    s.total -= s.entries.front().cost;
    s.entries.pop_front();
  }
  Decision d;
  d.limit = limit.burst();
  if (cost > limit.burst()) {
    d.retry_after = Decision::kNever;
  } else if (s.total + cost <= limit.burst()) {
    d.allowed = true;
    if (cost > 0) {
      s.entries.push_back({now, cost});
      s.total += cost;
    }
  } else {
    // The earliest instant enough old grants have left the window.
    int64_t freed = 0;
    for (const auto& e : s.entries) {
      freed += e.cost;
      if (s.total - freed + cost <= limit.burst()) {
        d.retry_after = Ns(e.at_ns + w - now_ns);
        break;
      }
    }
  }
  d.remaining = limit.burst() - s.total;
  const int64_t idle = s.entries.empty() ? now : s.entries.back().at_ns + w;
  d.reset_after = Ns(idle - now_ns);
  if (idle_at != nullptr) *idle_at = idle;
  return d;
}

}  // namespace tollgate
