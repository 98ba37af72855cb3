// The contract every Store must honour, as a value-parameterized GoogleTest
// suite. A store's test file instantiates it with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Local, StoreContractTest,
//                            ::testing::Values(StoreFactory([] { return MakeLocal(); })));
//
// The limits used refill at most once every 1000 s, so the suite holds for
// stores that take time from elsewhere (Redis TIME) without a manual clock.
#ifndef TOLLGATE_TESTS_STORE_CONTRACT_H_
#define TOLLGATE_TESTS_STORE_CONTRACT_H_

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_STORE_CONTRACT_H_
