// The contract every Store must honour, as a value-parameterized GoogleTest
// suite. A store's test file instantiates it with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Local, StoreContractTest,
//                            ::testing::Values(StoreFactory([] { return MakeLocal(); })));
//
// The limits used refill at most once every 1000 s, and windows last 366
// days, so the suite holds for stores that take time from elsewhere (Redis
// TIME) without a manual clock.
#ifndef TOLLGATE_TESTS_STORE_CONTRACT_H_
#define TOLLGATE_TESTS_STORE_CONTRACT_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tollgate/store.h"

namespace tollgate::testing {

using StoreFactory = std::function<std::unique_ptr<Store>()>;

class StoreContractTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam()();
    ASSERT_NE(store_, nullptr);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ =
        std::string(info->name()) + "\x1f" + std::to_string(reinterpret_cast<uintptr_t>(this));
  }
  static Limit SlowBucket(int64_t burst) {
    LimitSpec s;
    s.rate = 0.001;
    s.burst = burst;
    return *Limit::Create(s);
  }
  // A fixed or sliding window of `burst` per 366 days: no boundary passes
  // during a test (except with probability ~1e-7 at the one boundary a year).
  static Limit YearWindow(Algorithm algorithm, int64_t burst) {
    LimitSpec s;
    s.algorithm = algorithm;
    s.burst = burst;
    s.window = std::chrono::hours(24 * 366);
    return *Limit::Create(s);
  }
  // Key administration runs on every algorithm the remote stores hold: a
  // token bucket and both windows.
  static std::vector<Limit> AdminLimits() {
    return {SlowBucket(5), YearWindow(Algorithm::kFixedWindow, 5),
            YearWindow(Algorithm::kSlidingWindow, 5)};
  }
  std::string Key(const std::string& name) const { return prefix_ + "\x1f" + name; }
  Decision One(const std::string& key, const Limit& l, int64_t cost) {
    auto r = AcquireOne(*store_, key, l, cost);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Decision{};
  }

  std::unique_ptr<Store> store_;
  std::string prefix_;
};

TEST_P(StoreContractTest, AllowsBurstThenRejects) {
  const Limit l = SlowBucket(5);
  for (int i = 0; i < 5; ++i) {
    Decision d = One(Key("a"), l, 1);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.remaining, 4 - i);
    EXPECT_EQ(d.limit, 5);
  }
  Decision d = One(Key("a"), l, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_GT(d.retry_after.count(), 0);
  EXPECT_NE(d.retry_after, Decision::kNever);
}

TEST_P(StoreContractTest, BatchIsAllOrNothing) {
  const Limit roomy = SlowBucket(5), tight = SlowBucket(1);
  ASSERT_TRUE(One(Key("tight"), tight, 1).allowed);
  const std::string a = Key("roomy"), b = Key("tight");
  AcquireItem items[] = {{a, &roomy, 2}, {b, &tight, 1}};
  auto r = store_->Acquire(items);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->denied_index, 1);
  ASSERT_EQ(r->decisions.size(), 2u);
  EXPECT_FALSE(r->decisions[1].allowed);
  // The roomy item would fit: it says so, and reports its state uncharged.
  EXPECT_TRUE(r->decisions[0].allowed);
  EXPECT_EQ(r->decisions[0].remaining, 5);
  // The roomy bucket was not charged.
  EXPECT_EQ(One(a, roomy, 0).remaining, 5);
  const std::string other = Key("other");
  AcquireItem ok_items[] = {{a, &roomy, 2}, {other, &tight, 1}};
  auto ok = store_->Acquire(ok_items);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->allowed);
  EXPECT_EQ(ok->denied_index, -1);
  EXPECT_EQ(One(a, roomy, 0).remaining, 3);
}

TEST_P(StoreContractTest, DuplicateKeysInOneBatchAddUp) {
  const Limit l = SlowBucket(5);
  const std::string k = Key("dup");
  AcquireItem items[] = {{k, &l, 3}, {k, &l, 3}};
  auto r = store_->Acquire(items);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(One(k, l, 0).remaining, 5);
}

TEST_P(StoreContractTest, CostZeroPeeks) {
  const Limit l = SlowBucket(3);
  ASSERT_TRUE(One(Key("p"), l, 2).allowed);
  for (int i = 0; i < 3; ++i) {
    Decision d = One(Key("p"), l, 0);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 1);
  }
}

TEST_P(StoreContractTest, CostAboveBurstIsNever) {
  const Limit l = SlowBucket(3);
  Decision d = One(Key("big"), l, 4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Decision::kNever);
  EXPECT_TRUE(One(Key("big"), l, 3).allowed);
}

TEST_P(StoreContractTest, HostileKeysStayApart) {
  const Limit l = SlowBucket(1);
  const std::vector<std::string> keys = {"{tag}",
                                         "{tag}x",
                                         "a\nb",
                                         "a b",
                                         "a\x1f"
                                         "b",
                                         std::string(5000, 'z'),
                                         std::string(5000, 'z') + "y",
                                         "",
                                         "\xff\xfe"};
  for (const auto& k : keys) ASSERT_TRUE(One(Key(k), l, 1).allowed) << k.substr(0, 20);
  for (const auto& k : keys) EXPECT_FALSE(One(Key(k), l, 1).allowed) << k.substr(0, 20);
}

TEST_P(StoreContractTest, ConcurrentCallersNeverOverGrant) {
  const Limit l = SlowBucket(20);
  const std::string k = Key("hot");
  std::atomic<int> allowed{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        auto r = AcquireOne(*store_, k, l, 1);
        if (!r.ok()) {
          errors.fetch_add(1);
        } else if (r->allowed) {
          allowed.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(allowed.load(), 20);
}

TEST_P(StoreContractTest, WindowsAllowBurstPerWindowThenReject) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow}) {
    SCOPED_TRACE(std::string(AlgorithmName(a)));
    const Limit l = YearWindow(a, 5);
    const std::string k = Key("w" + std::string(AlgorithmName(a)));
    Decision d = One(k, l, 2);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 3);
    EXPECT_EQ(d.limit, 5);
    EXPECT_GT(d.reset_after.count(), 0);
    EXPECT_TRUE(One(k, l, 2).allowed);
    d = One(k, l, 2);  // 4 used: 2 more do not fit
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.remaining, 1);
    EXPECT_GT(d.retry_after.count(), 0);
    EXPECT_NE(d.retry_after, Decision::kNever);
    d = One(k, l, 6);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after, Decision::kNever);
    d = One(k, l, 1);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    d = One(k, l, 0);  // a peek
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_FALSE(One(k, l, 1).allowed);
  }
}

TEST_P(StoreContractTest, MixedAlgorithmBatchIsAllOrNothing) {
  const Limit bucket = SlowBucket(5);
  const Limit fixed = YearWindow(Algorithm::kFixedWindow, 3);
  const Limit sliding = YearWindow(Algorithm::kSlidingWindow, 4);
  const std::string b = Key("mb"), f = Key("mf"), s = Key("ms");
  ASSERT_TRUE(One(f, fixed, 2).allowed);
  // The fixed window has 1 left: the batch is denied there and charges nothing.
  AcquireItem denied[] = {{b, &bucket, 2}, {s, &sliding, 3}, {f, &fixed, 2}};
  auto r = store_->Acquire(denied);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->denied_index, 2);
  ASSERT_EQ(r->decisions.size(), 3u);
  EXPECT_TRUE(r->decisions[0].allowed);
  EXPECT_EQ(r->decisions[0].remaining, 5);  // uncharged state
  EXPECT_TRUE(r->decisions[1].allowed);
  EXPECT_EQ(r->decisions[1].remaining, 4);
  EXPECT_FALSE(r->decisions[2].allowed);
  EXPECT_EQ(r->decisions[2].remaining, 1);
  EXPECT_EQ(One(b, bucket, 0).remaining, 5);
  EXPECT_EQ(One(s, sliding, 0).remaining, 4);
  EXPECT_EQ(One(f, fixed, 0).remaining, 1);
  // Duplicate window keys add up within the batch: 3 + 2 > 4.
  AcquireItem dup[] = {{s, &sliding, 3}, {b, &bucket, 1}, {s, &sliding, 2}};
  r = store_->Acquire(dup);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(One(s, sliding, 0).remaining, 4);
  EXPECT_EQ(One(b, bucket, 0).remaining, 5);
  // A batch that fits charges every item once.
  AcquireItem fits[] = {{b, &bucket, 2}, {s, &sliding, 3}, {f, &fixed, 1}};
  r = store_->Acquire(fits);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(r->denied_index, -1);
  ASSERT_EQ(r->decisions.size(), 3u);
  EXPECT_EQ(r->decisions[0].remaining, 3);
  EXPECT_EQ(r->decisions[1].remaining, 1);
  EXPECT_EQ(r->decisions[2].remaining, 0);
  EXPECT_EQ(One(b, bucket, 0).remaining, 3);
  EXPECT_EQ(One(s, sliding, 0).remaining, 1);
  EXPECT_EQ(One(f, fixed, 0).remaining, 0);
}

TEST_P(StoreContractTest, WindowsNeverOverGrantUnderConcurrency) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow}) {
    SCOPED_TRACE(std::string(AlgorithmName(a)));
    const Limit l = YearWindow(a, 20);
    const std::string k = Key("hotw" + std::string(AlgorithmName(a)));
    std::atomic<int> allowed{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 25; ++i) {
          auto r = AcquireOne(*store_, k, l, 1);
          if (!r.ok()) {
            errors.fetch_add(1);
          } else if (r->allowed) {
            allowed.fetch_add(1);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(allowed.load(), 20);
  }
}

// Key administration: Store::ResetKey and SetRemaining.

TEST_P(StoreContractTest, ResetKeyForgetsStateAsIfNeverSeen) {
  for (const Limit& l : AdminLimits()) {
    SCOPED_TRACE(std::string(AlgorithmName(l.algorithm())));
    const std::string k = Key("reset" + std::string(AlgorithmName(l.algorithm())));
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(One(k, l, 1).allowed) << i;
    ASSERT_FALSE(One(k, l, 1).allowed);
    ASSERT_TRUE(store_->ResetKey(k, l).ok());
    EXPECT_EQ(One(k, l, 0).remaining, 5);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(One(k, l, 1).allowed) << i;
    EXPECT_FALSE(One(k, l, 1).allowed);
    // A key never seen: nothing to forget, and it stays a full one.
    const std::string never = Key("never" + std::string(AlgorithmName(l.algorithm())));
    EXPECT_TRUE(store_->ResetKey(never, l).ok());
    EXPECT_EQ(One(never, l, 0).remaining, 5);
  }
}

TEST_P(StoreContractTest, SetRemainingLeavesExactlyThatMany) {
  for (const Limit& l : AdminLimits()) {
    SCOPED_TRACE(std::string(AlgorithmName(l.algorithm())));
    const std::string k = Key("set" + std::string(AlgorithmName(l.algorithm())));
    // Up from debt, down from full, and to both ends.
    for (int i = 0; i < 6; ++i) One(k, l, 1);
    for (int64_t remaining : {2, 5, 1, 0, 3}) {
      SCOPED_TRACE(remaining);
      auto set = store_->SetRemaining(k, l, remaining);
      ASSERT_TRUE(set.ok()) << set.status().ToString();
      EXPECT_EQ(set->remaining, remaining);
      EXPECT_EQ(set->limit, 5);
      EXPECT_EQ(One(k, l, 0).remaining, remaining);
    }
    // 3 left: three pass, the fourth waits (a finite wait, not "never").
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(One(k, l, 1).allowed) << i;
    Decision d = One(k, l, 1);
    EXPECT_FALSE(d.allowed);
    EXPECT_GT(d.retry_after.count(), 0);
    EXPECT_NE(d.retry_after, Decision::kNever);
  }
}

TEST_P(StoreContractTest, SetRemainingZeroDenies) {
  const Limit l = SlowBucket(5);
  const std::string k = Key("zero");
  auto set = store_->SetRemaining(k, l, 0);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->remaining, 0);
  EXPECT_GT(set->reset_after.count(), 0);
  EXPECT_FALSE(One(k, l, 1).allowed);
}

TEST_P(StoreContractTest, SetRemainingRefusesOutOfRange) {
  const Limit l = SlowBucket(5);
  const std::string k = Key("range");
  ASSERT_TRUE(One(k, l, 2).allowed);
  for (int64_t bad : {int64_t{-1}, int64_t{6}, INT64_MAX, INT64_MIN}) {
    auto set = store_->SetRemaining(k, l, bad);
    ASSERT_FALSE(set.ok()) << bad;
    EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(set.status().message().find("remaining"), std::string::npos);
  }
  EXPECT_EQ(One(k, l, 0).remaining, 3);  // unchanged
}

// A set races with decisions on the key and lands wholly before or after
// each of them: had it been a reset followed by a charge of the burst, a
// decision in between would leave the charge no room, and the set would fail
// or leave more than asked.
TEST_P(StoreContractTest, SetRemainingIsAtomicWithDecisions) {
  const Limit l = SlowBucket(1000);
  const std::string k = Key("race");
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::atomic<int64_t> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        if (!AcquireOne(*store_, k, l, 1).ok()) errors.fetch_add(1);
        calls.fetch_add(1);
      }
    });
  }
  // Sets while the callers run: at least 200, and until they have decided
  // 2000 times in between (bounded by a count, never by time).
  while (calls.load() == 0) std::this_thread::yield();
  const int64_t first = calls.load();
  int sets = 0;
  for (; sets < 200 || (calls.load() - first < 2000 && sets < 200000); ++sets) {
    auto set = store_->SetRemaining(k, l, 0);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_EQ(set->remaining, 0) << "set " << sets;
    ASSERT_TRUE(store_->ResetKey(k, l).ok());
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  auto set = store_->SetRemaining(k, l, 7);
  ASSERT_TRUE(set.ok());
  int granted = 0;
  while (One(k, l, 1).allowed && granted < 100) ++granted;
  EXPECT_EQ(granted, 7);
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_STORE_CONTRACT_H_
