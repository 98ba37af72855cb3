#include "tollgate/circuit_breaker.h"

#include <cassert>
#include <string>
#include <utility>

namespace tollgate {
namespace {

// word_ layout: generation (46 bits) << 18 | probes in flight (16 bits) << 2 | state (2 bits).
constexpr int kProbeShift = 2;
constexpr int kGenerationShift = 18;
constexpr uint64_t kStateMask = 0x3;
constexpr uint64_t kProbeMask = 0xFFFF;
constexpr uint64_t kOneProbe = uint64_t{1} << kProbeShift;

BreakerState StateOf(uint64_t w) { return static_cast<BreakerState>(w & kStateMask); }
uint64_t ProbesOf(uint64_t w) { return (w >> kProbeShift) & kProbeMask; }
uint64_t GenerationOf(uint64_t w) { return w >> kGenerationShift; }
uint64_t MakeWord(uint64_t generation, BreakerState s) {
  return (generation << kGenerationShift) | static_cast<uint64_t>(s);
}

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

std::string_view BreakerStateName(BreakerState s) {
  switch (s) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

std::string_view BreakerReasonName(BreakerReason r) {
  switch (r) {
    case BreakerReason::kConsecutiveFailures:
      return "consecutive_failures";
    case BreakerReason::kFailureRatio:
      return "failure_ratio";
    case BreakerReason::kCooldownElapsed:
      return "cooldown_elapsed";
    case BreakerReason::kProbeSucceeded:
      return "probe_succeeded";
    case BreakerReason::kProbeFailed:
      return "probe_failed";
    case BreakerReason::kForced:
      return "forced";
    case BreakerReason::kNoAnswer:
      return "no_answer";
  }
  return "unknown";
}

Status CircuitBreaker::Validate(const CircuitBreakerOptions& o) {
  if (o.consecutive_failures < 1)
    return InvalidArgument("breaker.consecutive_failures: must be at least 1");
  if (!(o.failure_ratio > 0)) return InvalidArgument("breaker.failure_ratio: must be > 0");
  if (o.min_calls < 1) return InvalidArgument("breaker.min_calls: must be at least 1");
  if (o.window.count() <= 0) return InvalidArgument("breaker.window: must be positive");
  if (o.open_duration.count() < 0)
    return InvalidArgument("breaker.open_duration: must not be negative");
  if (o.half_open_probes < 1 || o.half_open_probes > static_cast<int>(kProbeMask))
    return InvalidArgument("breaker.half_open_probes: must be in 1..65535");
  if (o.clock == nullptr) return InvalidArgument("breaker.clock: must not be null");
  return Status::Ok();
}

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options)
    : options_(std::move(options)),
      bucket_ns_(std::max<int64_t>(1, options_.window.count() / kBuckets)),
      word_(MakeWord(0, BreakerState::kClosed)) {
  assert(Validate(options_).ok());
}

CircuitBreaker::Permit CircuitBreaker::Allow() {
  for (;;) {
    uint64_t w = word_.load(std::memory_order_acquire);
    switch (StateOf(w)) {
      case BreakerState::kClosed:
        return Permit(Permit::Kind::kNormal, GenerationOf(w));
      case BreakerState::kOpen: {
        if (!options_.caller_probes) {
          rejected_.fetch_add(1, std::memory_order_relaxed);
          return Permit();
        }
        const int64_t now = options_.clock->Now();
        if (now < open_until_.load(std::memory_order_acquire)) {
          rejected_.fetch_add(1, std::memory_order_relaxed);
          return Permit();
        }
        Transition(GenerationOf(w), BreakerState::kOpen, BreakerState::kHalfOpen,
                   BreakerReason::kCooldownElapsed);
        continue;  // re-read: now half-open (or moved on by another thread)
      }
      case BreakerState::kHalfOpen: {
        if (!options_.caller_probes ||
            ProbesOf(w) >= static_cast<uint64_t>(options_.half_open_probes)) {
          rejected_.fetch_add(1, std::memory_order_relaxed);
          return Permit();
        }
        if (word_.compare_exchange_weak(w, w + kOneProbe, std::memory_order_acq_rel)) {
          probes_.fetch_add(1, std::memory_order_relaxed);
          return Permit(Permit::Kind::kProbe, GenerationOf(w));
        }
        continue;
      }
    }
    assert(false && "invalid breaker state");
    return Permit();
  }
}

void CircuitBreaker::RecordNoAnswer(const Permit& permit) {
  Record(permit, false);
  if (permit.kind() != Permit::Kind::kNormal) return;
  // A no-op when the breaker moved on already (Record may just have opened it).
  Transition(permit.generation_, BreakerState::kClosed, BreakerState::kOpen,
             BreakerReason::kNoAnswer);
}

CircuitBreaker::Permit CircuitBreaker::TryProbe() {
  for (;;) {
    uint64_t w = word_.load(std::memory_order_acquire);
    switch (StateOf(w)) {
      case BreakerState::kClosed:
        return Permit();
      case BreakerState::kOpen:
        if (options_.clock->Now() < open_until_.load(std::memory_order_acquire)) return Permit();
        Transition(GenerationOf(w), BreakerState::kOpen, BreakerState::kHalfOpen,
                   BreakerReason::kCooldownElapsed);
        continue;
      case BreakerState::kHalfOpen:
        if (ProbesOf(w) >= static_cast<uint64_t>(options_.half_open_probes)) return Permit();
        if (word_.compare_exchange_weak(w, w + kOneProbe, std::memory_order_acq_rel)) {
          probes_.fetch_add(1, std::memory_order_relaxed);
          return Permit(Permit::Kind::kProbe, GenerationOf(w));
        }
        continue;
    }
    assert(false && "invalid breaker state");
    return Permit();
  }
}

int64_t CircuitBreaker::ProbeDueNs() const {
  if (StateOf(word_.load(std::memory_order_acquire)) != BreakerState::kOpen) return 0;
  return open_until_.load(std::memory_order_acquire);
}

void CircuitBreaker::Record(const Permit& permit, bool success) {
  if (!permit.admitted()) return;
  if (!success) failures_.fetch_add(1, std::memory_order_relaxed);
  uint64_t w = word_.load(std::memory_order_acquire);
  if (GenerationOf(w) != permit.generation_) return;  // issued by an earlier period
  const int64_t now = options_.clock->Now();

  if (permit.kind() == Permit::Kind::kNormal) {
    Bucket& b = CurrentBucket(now);
    if (success) {
      b.successes.fetch_add(1, std::memory_order_relaxed);
      if (consecutive_.load(std::memory_order_relaxed) != 0)
        consecutive_.store(0, std::memory_order_relaxed);
      return;
    }
    b.failures.fetch_add(1, std::memory_order_relaxed);
    const int32_t streak = consecutive_.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (streak >= options_.consecutive_failures) {
      Transition(permit.generation_, BreakerState::kClosed, BreakerState::kOpen,
                 BreakerReason::kConsecutiveFailures);
    } else if (RatioExceeded(now)) {
      Transition(permit.generation_, BreakerState::kClosed, BreakerState::kOpen,
                 BreakerReason::kFailureRatio);
    }
    return;
  }

  // A probe of the current half-open period: give back its slot, then decide.
  while (GenerationOf(w) == permit.generation_ && StateOf(w) == BreakerState::kHalfOpen &&
         ProbesOf(w) > 0) {
    if (word_.compare_exchange_weak(w, w - kOneProbe, std::memory_order_acq_rel)) break;
  }
  if (success) {
    Transition(permit.generation_, BreakerState::kHalfOpen, BreakerState::kClosed,
               BreakerReason::kProbeSucceeded);
  } else {
    Transition(permit.generation_, BreakerState::kHalfOpen, BreakerState::kOpen,
               BreakerReason::kProbeFailed);
  }
}

BreakerState CircuitBreaker::state() const {
  return StateOf(word_.load(std::memory_order_acquire));
}

BreakerCounters CircuitBreaker::counters() const {
  BreakerCounters c;
  c.opened = opened_.load(std::memory_order_relaxed);
  c.half_opened = half_opened_.load(std::memory_order_relaxed);
  c.closed = closed_.load(std::memory_order_relaxed);
  c.opened_by_consecutive = by_consecutive_.load(std::memory_order_relaxed);
  c.opened_by_ratio = by_ratio_.load(std::memory_order_relaxed);
  c.opened_by_probe = by_probe_.load(std::memory_order_relaxed);
  c.opened_by_no_answer = by_no_answer_.load(std::memory_order_relaxed);
  c.rejected = rejected_.load(std::memory_order_relaxed);
  c.probes = probes_.load(std::memory_order_relaxed);
  c.failures = failures_.load(std::memory_order_relaxed);
  return c;
}

void CircuitBreaker::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t w = word_.load(std::memory_order_acquire);
  if (StateOf(w) != BreakerState::kClosed) {
    TransitionLocked(w, BreakerState::kClosed, BreakerReason::kForced, options_.clock->Now());
  } else {
    consecutive_.store(0, std::memory_order_relaxed);
    ClearWindow();
  }
}

void CircuitBreaker::ForceOpen() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t w = word_.load(std::memory_order_acquire);
  if (StateOf(w) != BreakerState::kOpen)
    TransitionLocked(w, BreakerState::kOpen, BreakerReason::kForced, options_.clock->Now());
}

CircuitBreaker::Bucket& CircuitBreaker::CurrentBucket(int64_t now) {
  const int64_t index = FloorDiv(now, bucket_ns_);
  Bucket& b = buckets_[static_cast<size_t>(((index % kBuckets) + kBuckets) % kBuckets)];
  int64_t epoch = b.epoch.load(std::memory_order_acquire);
  if (epoch < index && b.epoch.compare_exchange_strong(epoch, index, std::memory_order_acq_rel)) {
    // Counts added by racing threads between the exchange and these stores are
    // lost: the ratio is approximate by design (see the header).
    b.successes.store(0, std::memory_order_relaxed);
    b.failures.store(0, std::memory_order_relaxed);
  }
  return b;
}

bool CircuitBreaker::RatioExceeded(int64_t now) const {
  if (options_.failure_ratio > 1.0) return false;
  const int64_t index = FloorDiv(now, bucket_ns_);
  uint64_t total = 0, failed = 0;
  for (const Bucket& b : buckets_) {
    const int64_t epoch = b.epoch.load(std::memory_order_acquire);
    if (epoch > index - kBuckets && epoch <= index) {
      const uint64_t f = b.failures.load(std::memory_order_relaxed);
      total += f + b.successes.load(std::memory_order_relaxed);
      failed += f;
    }
  }
  return total >= static_cast<uint64_t>(options_.min_calls) &&
         static_cast<double>(failed) >= options_.failure_ratio * static_cast<double>(total);
}

void CircuitBreaker::ClearWindow() {
  for (Bucket& b : buckets_) {
    b.epoch.store(-1, std::memory_order_relaxed);
    b.successes.store(0, std::memory_order_relaxed);
    b.failures.store(0, std::memory_order_relaxed);
  }
}

bool CircuitBreaker::Transition(uint64_t generation, BreakerState from, BreakerState to,
                                BreakerReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t w = word_.load(std::memory_order_acquire);
  if (GenerationOf(w) != generation || StateOf(w) != from) return false;  // someone moved it
  TransitionLocked(w, to, reason, options_.clock->Now());
  return true;
}

void CircuitBreaker::TransitionLocked(uint64_t w, BreakerState to, BreakerReason reason,
                                      int64_t now) {
  const BreakerState from = StateOf(w);
  if (to == BreakerState::kOpen) {
    open_until_.store(now + options_.open_duration.count(), std::memory_order_release);
    opened_.fetch_add(1, std::memory_order_relaxed);
    if (reason == BreakerReason::kConsecutiveFailures) by_consecutive_.fetch_add(1);
    if (reason == BreakerReason::kFailureRatio) by_ratio_.fetch_add(1);
    if (reason == BreakerReason::kProbeFailed) by_probe_.fetch_add(1);
    if (reason == BreakerReason::kNoAnswer) by_no_answer_.fetch_add(1);
  } else if (to == BreakerState::kHalfOpen) {
    half_opened_.fetch_add(1, std::memory_order_relaxed);
  } else {
    consecutive_.store(0, std::memory_order_relaxed);
    ClearWindow();
    closed_.fetch_add(1, std::memory_order_relaxed);
  }
  // Only probe admissions change the word outside mu_, and only its probe bits.
  const uint64_t next = MakeWord(GenerationOf(w) + 1, to);
  while (!word_.compare_exchange_weak(w, next, std::memory_order_acq_rel)) {
  }
  if (options_.listener) options_.listener(BreakerTransition{from, to, reason, now});
}

}  // namespace tollgate
