#include "local/gcra_step.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tollgate/algorithm.h"

namespace tollgate::internal {
namespace {

Limit Make(Algorithm a, double rate, int64_t burst, Nanos max_delay = Nanos(0)) {
  LimitSpec s;
  s.algorithm = a;
  s.rate = rate;
  s.burst = burst;
  s.max_delay = max_delay;
  auto l = Limit::Create(s);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return l.ok() ? *l : *Limit::Create(LimitSpec{.rate = 1, .burst = 1});
}

void ExpectSame(const StepResult& a, const StepResult& b) {
  EXPECT_EQ(a.decision, b.decision);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.changed, b.changed);
  EXPECT_EQ(a.idle_at, b.idle_at);
}

// The inlined step must be core's Step() exactly, for every input: the local
// store takes GcraStep / GcraCharge + GcraAllowed, the other stores Step().
TEST(GcraStepTest, EqualsCoreStepEverywhere) {
  const std::vector<Limit> limits = {
      Make(Algorithm::kTokenBucket, 1e6, 1000),      Make(Algorithm::kTokenBucket, 10, 20),
      Make(Algorithm::kTokenBucket, 3, 1),           Make(Algorithm::kTokenBucket, 1e9, 1),
      Make(Algorithm::kTokenBucket, 0.5, 7),         Make(Algorithm::kTokenBucket, 1024, 5),
      Make(Algorithm::kTokenBucket, 1e-3, 1000),     Make(Algorithm::kLeakyBucket, 100, 50),
      Make(Algorithm::kTokenBucket, 999'999.9, 333),
  };
  std::mt19937_64 rng(7);
  const int64_t t0 = 1'000'000'000'000LL;
  for (const Limit& l : limits) {
    ASSERT_TRUE(IsGcra(l)) << l.ToString();
    const int64_t tol = l.tolerance_ns();
    for (int i = 0; i < 20'000; ++i) {
      const int64_t now = t0 + static_cast<int64_t>(rng() % 1'000'000'000'000ULL);
      // States around now: far past, within the tolerance, beyond it, fresh (small).
      int64_t tat;
      switch (rng() % 5) {
        case 0:
          tat = static_cast<int64_t>(rng() % 100);
          break;
        case 1:
          tat = now - static_cast<int64_t>(rng() % (tol + 2));
          break;
        case 2:
          tat = now + static_cast<int64_t>(rng() % (tol + 2));
          break;
        case 3:
          tat = now + tol - static_cast<int64_t>(rng() % 3) * l.interval_ns();
          break;
        default:
          tat = now + static_cast<int64_t>(rng() % (2 * tol + 2)) - tol;
          break;
      }
      const uint64_t state = static_cast<uint64_t>(tat);
      const int64_t costs[] = {
          0, 1, 2, l.burst(), l.burst() + 1, static_cast<int64_t>(rng() % (l.burst() + 2))};
      for (int64_t cost : costs) {
        const StepResult core = Step(l, state, cost, now);
        ExpectSame(GcraStep(l, state, cost, now), core);
        int64_t tat_after = 0;
        const bool charged = GcraCharge(l, state, cost, now, &tat_after);
        EXPECT_EQ(charged, core.changed) << l.ToString() << " cost " << cost;
        if (charged) {
          EXPECT_EQ(static_cast<uint64_t>(tat_after), core.state);
          EXPECT_EQ(GcraAllowed(l, tat_after, now), core.decision);
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST(GcraStepTest, OnlyMetersAreGcra) {
  EXPECT_TRUE(IsGcra(Make(Algorithm::kTokenBucket, 10, 10)));
  EXPECT_TRUE(IsGcra(Make(Algorithm::kLeakyBucket, 10, 10)));
  EXPECT_FALSE(IsGcra(Make(Algorithm::kLeakyBucket, 10, 10, Nanos(1'000'000))));
  LimitSpec w;
  w.algorithm = Algorithm::kFixedWindow;
  w.burst = 10;
  w.window = Nanos(1'000'000'000);
  EXPECT_FALSE(IsGcra(*Limit::Create(w)));
}

}  // namespace
}  // namespace tollgate::internal
