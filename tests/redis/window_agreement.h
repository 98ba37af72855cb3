// Drives a Redis-backed store (client clock), a LocalStore and a reference
// model (core's Step() with the Store contract's batch rules) with the same
// sequence of (time, batch) on one ManualClock and requires every Decision to
// be identical: the Redis script must reproduce core's window and bucket
// arithmetic exactly, batches included. Shared by tests/redis and tests/cluster.
//
// Alignment: LocalStore counts time from its creation (its time is Now() when
// it is created while the clock reads kStartNs), the model uses Now(), Redis
// gets WallNow() = Now() + kWallOffsetNs. Every window used divides
// kWallOffsetNs, so window boundaries fall at the same instants for all three.
//
// LocalStore is compared only while the clock has not stepped back: after a
// batch that failed in its second phase, LocalStore refunds the charges,
// which leaves the rolled window (index, count - cost) or TAT - increment
// instead of the original word; equal in meaning on a forward clock, not after
// a backward step. Redis, like the model, never writes a denied batch.
#ifndef TOLLGATE_TESTS_REDIS_WINDOW_AGREEMENT_H_
#define TOLLGATE_TESTS_REDIS_WINDOW_AGREEMENT_H_

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "tollgate/algorithm.h"
#include "tollgate/clock.h"
#include "tollgate/limit.h"
#include "tollgate/local_store.h"
#include "tollgate/store.h"

namespace tollgate::testing {

inline constexpr int64_t kStartNs = 1'000'000'000'000LL;
inline constexpr int64_t kWallOffsetNs = 1'700'000'000'000'000'000LL;

inline Limit WindowLimit(Algorithm a, int64_t burst, int64_t window_ns) {
  LimitSpec s;
  s.algorithm = a;
  s.burst = burst;
  s.window = Nanos(window_ns);
  return *Limit::Create(s);
}

inline Limit BucketLimit(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

inline std::string Describe(const Decision& d) {
  return "allowed=" + std::to_string(d.allowed) + " remaining=" + std::to_string(d.remaining) +
         " retry=" + std::to_string(d.retry_after.count()) +
         " reset=" + std::to_string(d.reset_after.count()) +
         " delay=" + std::to_string(d.delay.count());
}

// The reference: the Store contract's batch semantics over core's Step(),
// single threaded, on a map of state words.
inline BatchDecision ReferenceBatch(std::map<std::string, uint64_t>& state,
                                    const std::vector<AcquireItem>& items, int64_t now) {
  BatchDecision out;
  for (size_t i = 0; i < items.size(); ++i) {
    out.decisions.push_back(
        Step(*items[i].limit, state[std::string(items[i].key)], items[i].cost, now).decision);
    if (!out.decisions[i].allowed && out.denied_index < 0) out.denied_index = static_cast<int>(i);
  }
  // In a denied batch, an item that would fit reports its state without the charge.
  auto uncharged = [&] {
    for (size_t i = 0; i < items.size(); ++i) {
      Decision& d = out.decisions[i];
      if (!d.allowed) continue;
      const Decision peek =
          Step(*items[i].limit, state[std::string(items[i].key)], 0, now).decision;
      d.remaining = peek.remaining;
      d.reset_after = peek.reset_after;
      d.delay = Nanos(0);
    }
  };
  if (out.denied_index >= 0) {
    uncharged();
    return out;
  }
  auto work = state;
  std::vector<Decision> charged;
  for (size_t i = 0; i < items.size(); ++i) {
    auto& word = work[std::string(items[i].key)];
    StepResult r = Step(*items[i].limit, word, items[i].cost, now);
    if (!r.decision.allowed) {
      // Every item reports its state uncharged, this one (it fit alone) included.
      uncharged();
      out.decisions[i].allowed = false;
      out.decisions[i].delay = Nanos(0);  // a denied decision has nothing to wait for
      out.denied_index = static_cast<int>(i);
      return out;
    }
    if (r.changed) word = r.state;
    charged.push_back(r.decision);
  }
  state = std::move(work);
  out.decisions = std::move(charged);
  out.allowed = true;
  return out;
}

inline void ExpectSameBatch(const BatchDecision& got, const BatchDecision& want,
                            const std::vector<AcquireItem>& items, const std::string& where) {
  EXPECT_EQ(got.allowed, want.allowed) << where;
  EXPECT_EQ(got.denied_index, want.denied_index) << where;
  EXPECT_EQ(got.decisions.size(), want.decisions.size()) << where;
  for (size_t i = 0; i < items.size() && i < got.decisions.size(); ++i) {
    EXPECT_EQ(got.decisions[i], want.decisions[i])
        << where << " item " << i << " cost " << items[i].cost << " limit "
        << items[i].limit->ToString() << "\n got " << Describe(got.decisions[i]) << "\nwant "
        << Describe(want.decisions[i]);
  }
}

// One batch on Redis, the model (at `model_now`) and, unless null, LocalStore
// at the clock's current time; fails the test on any difference. Returns the
// number of items Redis allowed.
inline int CompareBatch(Store& redis, LocalStore* local, std::map<std::string, uint64_t>& model,
                        int64_t model_now, const std::vector<AcquireItem>& items,
                        const std::string& where) {
  const BatchDecision want = ReferenceBatch(model, items, model_now);
  auto got = redis.Acquire(items);
  EXPECT_TRUE(got.ok()) << where << ": " << got.status().ToString();
  if (!got.ok()) return 0;
  ExpectSameBatch(*got, want, items, where + " (redis vs core model)");
  if (local != nullptr) {
    auto mine = local->Acquire(items);
    EXPECT_TRUE(mine.ok()) << where << ": " << mine.status().ToString();
    if (mine.ok()) ExpectSameBatch(*got, *mine, items, where + " (redis vs LocalStore)");
  }
  int allowed = 0;
  for (const Decision& d : got->decisions) allowed += d.allowed ? 1 : 0;
  return allowed;
}

// A random walk: clock steps that are short, long, backwards (when
// `backwards`; LocalStore is then not compared, see above), or land on a
// window boundary (-1, 0, +1 ns); batches of 1-3 items over fixed and sliding
// windows (1 ms .. 1.7 s, bursts 1 .. 2^20-1) and token buckets, costs 0..4
// (up to 1600 for large bursts) and burst + 1. Each key keeps one limit, as a
// real rule does.
inline void ExpectWindowsAgreeWithLocal(Store& redis, LocalStore& local, ManualClock& clock,
                                        uint64_t seed, int rounds, bool backwards) {
  std::map<std::string, uint64_t> model;
  const std::vector<int64_t> windows = {1'000'000, 3'400'000, 250'000'000, 1'000'000'000,
                                        1'700'000'000};
  const std::vector<int64_t> bursts = {1, 3, 5, 10, 1000, (int64_t{1} << 20) - 1};
  std::vector<Limit> limits;
  for (size_t i = 0; i < windows.size(); ++i) {
    limits.push_back(WindowLimit(Algorithm::kFixedWindow, bursts[i % bursts.size()], windows[i]));
    limits.push_back(
        WindowLimit(Algorithm::kSlidingWindow, bursts[(i + 2) % bursts.size()], windows[i]));
  }
  limits.push_back(WindowLimit(Algorithm::kSlidingWindow, 4, 250'000'000));
  limits.push_back(WindowLimit(Algorithm::kFixedWindow, (int64_t{1} << 20) - 1, 1'000'000));
  limits.push_back(BucketLimit(10, 10));
  limits.push_back(BucketLimit(0.3, 3));
  std::mt19937_64 rng(seed);
  int compared = 0, allowed = 0;
  for (int round = 0; round < rounds; ++round) {
    const int pick = static_cast<int>(rng() % 12);
    if (pick < 4) {
      clock.Advance(Nanos(static_cast<int64_t>(rng() % 2'000'000)));
    } else if (pick < 7) {
      clock.Advance(Nanos(static_cast<int64_t>(rng() % 300'000'000)));
    } else if (pick < 8) {
      clock.Advance(Nanos(static_cast<int64_t>(rng() % 4'000'000'000LL)));
    } else if (pick == 8 && backwards) {
      clock.Set(clock.Now() - static_cast<int64_t>(rng() % 300'000'000));
    } else if (pick == 9) {
      const int64_t w = windows[rng() % windows.size()];
      clock.Set((clock.Now() / w + 1) * w + static_cast<int64_t>(rng() % 3) - 1);
    }
    const size_t n = 1 + rng() % 3;
    std::vector<std::string> names;  // owns the keys the items point at
    names.reserve(n);
    std::vector<AcquireItem> items;
    for (size_t i = 0; i < n; ++i) {
      const size_t li = rng() % limits.size();
      const Limit* l = &limits[li];
      int64_t cost = static_cast<int64_t>(rng() % 5);
      if (l->burst() >= 1000) cost *= static_cast<int64_t>(1 + rng() % 400);
      if (rng() % 25 == 0) cost = l->burst() + 1;
      names.push_back("k" + std::to_string(rng() % 2) + "@" + std::to_string(li));
      items.push_back({names.back(), l, cost});
    }
    const std::string where = "seed " + std::to_string(seed) + " round " + std::to_string(round) +
                              " now " + std::to_string(clock.Now());
    allowed += CompareBatch(redis, backwards ? nullptr : &local, model, clock.Now(), items, where);
    compared += static_cast<int>(n);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(allowed, compared / 5);  // both outcomes were exercised
  EXPECT_LT(allowed, compared - compared / 10);
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_REDIS_WINDOW_AGREEMENT_H_
