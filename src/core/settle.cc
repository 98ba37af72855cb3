// Settle(): the cost known after the response and refunds, on one state word
// (include/tollgate/algorithm.h). Mirrored by src/redis/settle_script.cc.
#include <algorithm>

#include "tollgate/algorithm.h"

namespace tollgate {
namespace {

using i128 = __int128;

// The decision a settled state reports: the state as it is (remaining,
// reset) and whether a request of cost 1 would fit now (allowed, retry_after).
Decision Report(const Limit& limit, uint64_t state, int64_t now) {
  Decision d = Step(limit, state, 0, now).decision;
  const StepResult one = Step(limit, state, 1, now);
  d.allowed = one.decision.allowed;
  d.retry_after = one.decision.allowed ? Nanos(0) : one.decision.retry_after;
  d.delay = Nanos(0);
  return d;
}

SettleResult SettleBucket(const Limit& limit, uint64_t state, const SettleOp& op, int64_t now) {
  SettleResult out;
  const int64_t tat = static_cast<int64_t>(state);
  int64_t next = std::max(tat, now);
  if (op.refund > 0 && next > now) {
    // Never below now: a refund cannot fill the bucket past full.
    const i128 back =
        std::min<i128>(static_cast<i128>(op.refund) * limit.interval_ns(), next - now);
    next -= static_cast<int64_t>(back);
    out.refunded = static_cast<int64_t>((back + limit.interval_ns() - 1) / limit.interval_ns());
  }
  if (op.charge > 0) {
    const i128 cap = static_cast<i128>(now) + limit.tolerance_ns() + kMaxDebtNs;
    const i128 want = static_cast<i128>(next) + static_cast<i128>(op.charge) * limit.interval_ns();
    const int64_t after = static_cast<int64_t>(std::min(want, std::max<i128>(cap, next)));
    out.charged = after == want ? op.charge : limit.TokensIn(after - next);
    next = after;
  }
  out.step.state = state;
  if (out.charged > 0 || out.refunded > 0) {
    out.step.state = static_cast<uint64_t>(next);
    out.step.changed = out.step.state != state;
  }
  out.step.decision = Report(limit, out.step.state, now);
  out.step.idle_at = std::max(next, now);
  return out;
}

SettleResult SettleFixed(const Limit& limit, uint64_t state, const SettleOp& op, int64_t now) {
  SettleResult out;
  const int bits = FixedWindowCountBits(limit);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const int64_t index_mod = bits == 24 ? int64_t{1} << 40 : int64_t{1} << 23;
  const Calendar* calendar = limit.calendar();
  auto index_at = [&](int64_t t) {
    t = std::max<int64_t>(t, 0);
    return calendar != nullptr ? calendar->At(t).index : t / limit.window_ns();
  };
  int64_t idx = index_at(now);
  int64_t used = 0;
  bool held = false;  // the state holds window idx
  if (state != 0) {
    const int64_t stored = static_cast<int64_t>(state >> bits);
    const int64_t ahead = (idx - stored) & (index_mod - 1);
    if (ahead == 0 || ahead >= index_mod / 2) {
      if (ahead != 0) idx += index_mod - ahead;  // the clock stepped back: stay in it
      used = static_cast<int64_t>(state & mask);
      held = true;
    }
  }
  if (op.refund > 0 && held && index_at(op.charged_at_ns) == idx) {
    out.refunded = std::min(used, op.refund);
    used -= out.refunded;
  }
  if (op.charge > 0) {
    out.charged = std::min(op.charge, MaxSettleCount(limit) - used);
    used += out.charged;
  }
  out.step.state = state;
  if (out.charged > 0 || out.refunded > 0) {
    out.step.state =
        (static_cast<uint64_t>(idx & (index_mod - 1)) << bits) | static_cast<uint64_t>(used);
    out.step.changed = out.step.state != state;
  }
  StepResult view = Step(limit, out.step.state, 0, now);
  out.step.decision = Report(limit, out.step.state, now);
  out.step.idle_at = view.idle_at;
  return out;
}

constexpr int kSlidingBits = 20;
constexpr uint64_t kSlidingMask = (uint64_t{1} << kSlidingBits) - 1;
constexpr int64_t kSlidingIndexMod = int64_t{1} << 24;

SettleResult SettleSliding(const Limit& limit, uint64_t state, const SettleOp& op, int64_t now) {
  SettleResult out;
  const int64_t w = limit.window_ns();
  int64_t cur = std::max<int64_t>(now, 0) / w;
  int64_t prev = 0, curr = 0;
  bool held = false;
  if (state != 0) {
    const int64_t stored = static_cast<int64_t>(state >> (2 * kSlidingBits));
    const int64_t ahead = (cur - stored) & (kSlidingIndexMod - 1);
    const int64_t sprev = static_cast<int64_t>((state >> kSlidingBits) & kSlidingMask);
    const int64_t scurr = static_cast<int64_t>(state & kSlidingMask);
    if (ahead == 0 || ahead >= kSlidingIndexMod / 2) {
      if (ahead != 0) cur += kSlidingIndexMod - ahead;  // the clock stepped back
      prev = sprev;
      curr = scurr;
      held = true;
    } else if (ahead == 1) {
      prev = scurr;
    }
  }
  if (op.refund > 0 && held && std::max<int64_t>(op.charged_at_ns, 0) / w == cur) {
    out.refunded = std::min(curr, op.refund);
    curr -= out.refunded;
  }
  if (op.charge > 0) {
    out.charged = std::min(op.charge, MaxSettleCount(limit) - curr);
    curr += out.charged;
  }
  out.step.state = state;
  if (out.charged > 0 || out.refunded > 0) {
    out.step.state = (static_cast<uint64_t>(cur & (kSlidingIndexMod - 1)) << (2 * kSlidingBits)) |
                     (static_cast<uint64_t>(prev) << kSlidingBits) | static_cast<uint64_t>(curr);
    out.step.changed = out.step.state != state;
  }
  StepResult view = Step(limit, out.step.state, 0, now);
  out.step.decision = Report(limit, out.step.state, now);
  out.step.idle_at = view.idle_at;
  return out;
}

}  // namespace

int64_t MaxSettleCount(const Limit& limit) {
  switch (limit.algorithm()) {
    case Algorithm::kSlidingWindow:
      return static_cast<int64_t>(kSlidingMask);
    case Algorithm::kFixedWindow:
      // Redis keeps 7 decimal digits up to a burst of 9999999, else 13.
      if (limit.burst() <= 9'999'999) return 9'999'999;
      return (int64_t{1} << FixedWindowCountBits(limit)) - 1;
    default:
      return 0;
  }
}

SettleResult Settle(const Limit& limit, uint64_t state, const SettleOp& op, int64_t now_ns) {
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      return SettleBucket(limit, state, op, now_ns);
    case Algorithm::kFixedWindow:
      return SettleFixed(limit, state, op, now_ns);
    case Algorithm::kSlidingWindow:
      return SettleSliding(limit, state, op, now_ns);
    case Algorithm::kSlidingLog:
      break;
  }
  SettleResult out;
  out.step.state = state;
  out.step.decision.limit = limit.burst();
  return out;
}

}  // namespace tollgate
