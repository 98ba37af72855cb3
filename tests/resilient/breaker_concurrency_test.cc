// Many threads drive one breaker through outages; the listener must see a
// valid sequence of transitions and the counters must agree with it.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "tollgate/circuit_breaker.h"

namespace tollgate {
namespace {

TEST(BreakerConcurrencyTest, TransitionsStayConsistentUnderContention) {
  ManualClock clock;
  std::mutex mu;
  std::vector<BreakerTransition> seen;
  CircuitBreakerOptions o;
  o.consecutive_failures = 4;
  o.min_calls = 50;
  o.window = std::chrono::milliseconds(100);
  o.open_duration = std::chrono::milliseconds(5);
  o.half_open_probes = 3;
  o.clock = &clock;
  o.listener = [&](const BreakerTransition& t) {
    std::lock_guard<std::mutex> lock(mu);  // the breaker serialises; this guards `seen` for TSan
    seen.push_back(t);
  };
  CircuitBreaker breaker(o);

  // Time and the outage phases follow a global call count, not any one
  // thread's progress: however the threads are scheduled (all at once, or one
  // after another on a loaded machine), the calls go through alternating
  // failing / healthy phases of 2000 calls while the clock moves 20 us a call,
  // so the breaker opens, half-opens and closes many times.
  std::atomic<uint64_t> calls{0}, admitted{0}, refused{0};
  constexpr int kThreads = 4, kCalls = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kCalls; ++i) {
        const uint64_t n = calls.fetch_add(1);
        const bool failing = (n / 2000) % 2 == 1;
        clock.Advance(std::chrono::microseconds(20));
        auto p = breaker.Allow();
        if (!p.admitted()) {
          refused.fetch_add(1);
          continue;
        }
        admitted.fetch_add(1);
        const bool ok = !failing || rng() % 10 == 0;
        breaker.Record(p, ok);
      }
    });
  }
  for (auto& th : threads) th.join();

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(seen.empty());
  BreakerState state = BreakerState::kClosed;
  uint64_t opened = 0, half = 0, closed = 0;
  for (const auto& t : seen) {
    EXPECT_EQ(t.from, state);
    EXPECT_NE(t.from, t.to);
    if (t.from == BreakerState::kClosed) {
      EXPECT_EQ(t.to, BreakerState::kOpen);
    }
    if (t.from == BreakerState::kOpen) {
      EXPECT_EQ(t.to, BreakerState::kHalfOpen);
    }
    state = t.to;
    opened += t.to == BreakerState::kOpen;
    half += t.to == BreakerState::kHalfOpen;
    closed += t.to == BreakerState::kClosed;
  }
  EXPECT_EQ(state, breaker.state());
  const auto c = breaker.counters();
  EXPECT_EQ(c.opened, opened);
  EXPECT_EQ(c.half_opened, half);
  EXPECT_EQ(c.closed, closed);
  EXPECT_EQ(c.rejected, refused.load());
  EXPECT_GT(c.probes, 0u);
  EXPECT_GT(closed, 0u);
  EXPECT_EQ(admitted.load() + refused.load(), uint64_t{kThreads} * kCalls);
}

}  // namespace
}  // namespace tollgate
