// Random arrival sequences against an exact rational reference model.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tollgate/algorithm.h"

namespace tollgate {
namespace {

using i128 = __int128;
constexpr i128 kFemto = 1'000'000'000'000'000LL;  // tokens are scaled by 1e15 in the reference

// A continuous token bucket in exact rational arithmetic: tokens * 1e15.
struct Reference {
  i128 burst_f;
  i128 rate_micro;
  i128 tokens_f;
  int64_t last;
  bool Take(int64_t cost, int64_t now) {
    if (now > last) {
      tokens_f += static_cast<i128>(now - last) * rate_micro;
      if (tokens_f > burst_f) tokens_f = burst_f;
      last = now;
    }
    if (tokens_f >= cost * kFemto) {
      tokens_f -= cost * kFemto;
      return true;
    }
    return false;
  }
};

struct Grant {
  int64_t at;
  int64_t cost;
};

// Over every interval [t_i, t_j] between grants: sum <= burst + rate * (t_j - t_i).
void ExpectNoOverGrant(const std::vector<Grant>& grants, const Limit& l) {
  for (size_t i = 0; i < grants.size(); ++i) {
    i128 sum = 0;
    for (size_t j = i; j < grants.size(); ++j) {
      sum += grants[j].cost;
      const i128 allowed_f = static_cast<i128>(l.burst()) * kFemto +
                             static_cast<i128>(grants[j].at - grants[i].at) * l.rate_micro();
      ASSERT_LE(sum * kFemto, allowed_f) << "over-grant between grant " << i << " and " << j;
    }
  }
}

class TokenBucketProperty : public ::testing::TestWithParam<int> {};

TEST_P(TokenBucketProperty, NeverOverGrantsAndAgreesWithinOneToken) {
  std::mt19937_64 rng(GetParam());
  const double rates[] = {0.7, 1, 3, 10, 33.3, 250, 1000, 12345.678};
  const double rate = rates[rng() % std::size(rates)];
  const int64_t burst = 1 + static_cast<int64_t>(rng() % 40) + static_cast<int64_t>(rate);
  LimitSpec spec;
  spec.rate = rate;
  spec.burst = burst;
  auto limit = Limit::Create(spec);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  const Limit& l = *limit;

  Reference ref{static_cast<i128>(burst) * kFemto, l.rate_micro(),
                static_cast<i128>(burst) * kFemto, 0};
  uint64_t state = 0;
  int64_t now = 5'000'000'000;
  ref.last = now;
  const int64_t mean_gap = static_cast<int64_t>(1e9 / rate / 2) + 1;  // demand ~2x the rate
  std::vector<Grant> grants;
  for (int step = 0; step < 3000; ++step) {
    now += static_cast<int64_t>(rng() % (2 * mean_gap));
    const bool unit = step % 2 == 0;
    const int64_t cost = unit ? 1 : 1 + static_cast<int64_t>(rng() % std::min<int64_t>(burst, 5));
    StepResult r = Step(l, state, cost, now);
    const bool ref_allowed = ref.Take(cost, now);
    if (r.changed) state = r.state;
    if (r.decision.allowed) grants.push_back({now, cost});
    // Our available tokens (scaled) vs the reference's: within one token.
    const int64_t tat = static_cast<int64_t>(state);
    const i128 ours_f =
        static_cast<i128>(now + l.tolerance_ns() - std::max(tat, now)) * l.rate_micro();
    const i128 diff = ours_f - ref.tokens_f;
    ASSERT_LE(diff < 0 ? -diff : diff, kFemto + cost * kFemto)
        << "step " << step << " rate " << rate << " ref_allowed " << ref_allowed;
    ASSERT_LE(ours_f, ref.tokens_f + kFemto) << "more tokens than the reference at step " << step;
  }
  ExpectNoOverGrant(grants, l);
  EXPECT_GT(grants.size(), 100u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, TokenBucketProperty, ::testing::Range(1, 25));

// Unit costs only: the allowed count equals the reference's within one.
TEST(TokenBucketAgreement, UnitCostCountsMatchReference) {
  for (int seed = 1; seed <= 10; ++seed) {
    std::mt19937_64 rng(seed);
    LimitSpec spec;
    spec.rate = 3 + seed;
    spec.burst = 2 * (3 + seed);
    auto l = Limit::Create(spec);
    ASSERT_TRUE(l.ok());
    Reference ref{spec.burst * kFemto, l->rate_micro(), spec.burst * kFemto, 0};
    uint64_t state = 0;
    int64_t now = 1'000'000'000;
    ref.last = now;
    int ours = 0, theirs = 0;
    for (int i = 0; i < 5000; ++i) {
      now += static_cast<int64_t>(rng() % 100'000'000);
      StepResult r = Step(*l, state, 1, now);
      if (r.changed) state = r.state;
      ours += r.decision.allowed;
      theirs += ref.Take(1, now);
    }
    EXPECT_LE(ours, theirs);
    EXPECT_GE(ours, theirs - 1) << "seed " << seed;
  }
}

// Window algorithms: never more than burst within one fixed window; the
// sliding log never more than burst within any window-long interval.
TEST(WindowProperty, NeverOverGrant) {
  std::mt19937_64 rng(7);
  const int64_t w = 1'000'000'000;
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingLog}) {
    LimitSpec spec;
    spec.algorithm = a;
    spec.burst = 20;
    spec.window = Nanos(w);
    auto l = Limit::Create(spec);
    ASSERT_TRUE(l.ok());
    uint64_t state = 0;
    SlidingLogState log;
    int64_t now = 100 * w;
    std::vector<Grant> grants;
    for (int i = 0; i < 4000; ++i) {
      now += static_cast<int64_t>(rng() % (w / 20));
      const int64_t cost = 1 + static_cast<int64_t>(rng() % 3);
      bool allowed;
      if (a == Algorithm::kSlidingLog) {
        allowed = StepLog(*l, log, cost, now).allowed;
      } else {
        StepResult r = Step(*l, state, cost, now);
        if (r.changed) state = r.state;
        allowed = r.decision.allowed;
      }
      if (allowed) grants.push_back({now, cost});
    }
    for (size_t i = 0; i < grants.size(); ++i) {
      int64_t sum = 0;
      for (size_t j = i; j < grants.size() && grants[j].at < grants[i].at + w; ++j) {
        // Fixed window: only grants in the same window are bounded by burst.
        if (a == Algorithm::kFixedWindow && grants[j].at / w != grants[i].at / w) break;
        sum += grants[j].cost;
      }
      // The weighted sliding window is an approximation: it may exceed burst
      // within a window-long span by at most the previous window's share.
      const int64_t bound = a == Algorithm::kSlidingWindow ? 2 * spec.burst : spec.burst;
      ASSERT_LE(sum, bound) << AlgorithmName(a) << " at grant " << i;
    }
  }
}

}  // namespace
}  // namespace tollgate
