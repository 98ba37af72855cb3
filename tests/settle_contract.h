// The settlement contract (Store::Settle: cost after the response, refunds)
// every store that settles must honour, as a value-parameterized suite
// instantiated beside StoreContractTest with the same factory:
//
//   INSTANTIATE_TEST_SUITE_P(Local, SettleContractTest,
//                            ::testing::Values(StoreFactory([] { return MakeLocal(); })));
//
// Like the store contract, the limits refill once every 1000 s and windows
// last 366 days, so the cases hold on a store with its own clock (Redis TIME).
#ifndef TOLLGATE_TESTS_SETTLE_CONTRACT_H_
#define TOLLGATE_TESTS_SETTLE_CONTRACT_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "store_contract.h"
#include "tollgate/algorithm.h"

namespace tollgate::testing {

class SettleContractTest : public StoreContractTest {
 protected:
  Settled SettleOne(const std::string& key, const Limit& l, int64_t charge, int64_t refund,
                    Nanos age = Nanos(0)) {
    SettleItem item{key, &l, charge, refund, age};
    auto r = store_->Settle(std::span<const SettleItem>(&item, 1));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || r->size() != 1) return Settled{};
    return r->front();
  }
  static constexpr Nanos kSecond = std::chrono::seconds(1);
};

TEST_P(SettleContractTest, BucketChargeGoesIntoDebtThatLaterRequestsWaitOut) {
  ASSERT_TRUE(store_->SupportsSettle());
  const Limit l = SlowBucket(10);                   // one token per 1000 s
  ASSERT_TRUE(One(Key("b"), l, 1).allowed);         // the up-front estimate
  const Settled s = SettleOne(Key("b"), l, 24, 0);  // 25 tokens in all: 15 in debt
  EXPECT_EQ(s.charged, 24);
  EXPECT_EQ(s.refunded, 0);
  EXPECT_FALSE(s.decision.allowed);
  const Decision d = One(Key("b"), l, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  // A request of 1 fits once 16 tokens have refilled: 16000 s from the
  // charge, less the (small) time the test took since.
  EXPECT_LE(d.retry_after, 16000 * kSecond);
  EXPECT_GT(d.retry_after, 15900 * kSecond);
  EXPECT_LE(s.decision.retry_after, 16000 * kSecond);
  EXPECT_GT(s.decision.retry_after, 15900 * kSecond);
}

TEST_P(SettleContractTest, BucketRefundGivesBackTheChargeAndNeverOverfills) {
  const Limit l = SlowBucket(5);
  ASSERT_TRUE(One(Key("b"), l, 5).allowed);
  ASSERT_FALSE(One(Key("b"), l, 1).allowed);
  EXPECT_EQ(SettleOne(Key("b"), l, 0, 3).refunded, 3);
  EXPECT_TRUE(One(Key("b"), l, 3).allowed);
  EXPECT_FALSE(One(Key("b"), l, 1).allowed);
  // A full bucket takes no refund: it would grant more than burst.
  EXPECT_EQ(SettleOne(Key("full"), l, 0, 4).refunded, 0);
  EXPECT_TRUE(One(Key("full"), l, 5).allowed);
  EXPECT_FALSE(One(Key("full"), l, 1).allowed);
}

TEST_P(SettleContractTest, BucketDebtIsBounded) {
  const Limit l = SlowBucket(5);
  const Settled s = SettleOne(Key("b"), l, Limit::kMaxBurst, 0);
  EXPECT_GT(s.charged, 0);
  EXPECT_LT(s.charged, Limit::kMaxBurst);
  EXPECT_FALSE(s.decision.allowed);
  EXPECT_NE(s.decision.retry_after, Decision::kNever);
  EXPECT_LE(s.decision.retry_after, Nanos(l.tolerance_ns() + kMaxDebtNs));
}

TEST_P(SettleContractTest, WindowsCountPastTheLimitAndRefundWithinTheirWindow) {
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow}) {
    SCOPED_TRACE(std::string(AlgorithmName(a)));
    const Limit l = YearWindow(a, 10);
    const std::string k = Key(std::string(AlgorithmName(a)));
    ASSERT_TRUE(One(k, l, 1).allowed);
    const Settled s = SettleOne(k, l, 14, 0);  // 15 counted against 10
    EXPECT_EQ(s.charged, 14);
    EXPECT_FALSE(s.decision.allowed);
    // The settlement's own report: the window's end (a sliding window's
    // counts weigh on the next window too: up to two windows).
    EXPECT_EQ(s.decision.remaining, 0);
    EXPECT_GT(s.decision.reset_after.count(), 0);
    EXPECT_LE(s.decision.reset_after,
              std::chrono::hours(24 * 366) * (a == Algorithm::kSlidingWindow ? 2 : 1));
    const Decision d = One(k, l, 1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_GT(d.retry_after.count(), 0);
    EXPECT_NE(d.retry_after, Decision::kNever);
    // A refund of a charge made in an earlier window changes nothing...
    EXPECT_EQ(SettleOne(k, l, 0, 15, std::chrono::hours(24 * 400)).refunded, 0);
    EXPECT_FALSE(One(k, l, 1).allowed);
    // ...one made in this window gives it back, never below 0.
    EXPECT_EQ(SettleOne(k, l, 0, 20).refunded, 15);
    EXPECT_TRUE(One(k, l, 10).allowed);
    EXPECT_FALSE(One(k, l, 1).allowed);
  }
}

TEST_P(SettleContractTest, ConcurrentSettlementsAreExact) {
  const Limit bucket = SlowBucket(1000);
  const Limit window = YearWindow(Algorithm::kFixedWindow, 1000);
  constexpr int kThreads = 4, kEach = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        SettleOne(Key("b"), bucket, 2, 0);
        SettleOne(Key("w"), window, 2, 0);
        SettleOne(Key("b"), bucket, 0, 1);
        SettleOne(Key("w"), window, 0, 1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(One(Key("b"), bucket, 0).remaining, 1000 - kThreads * kEach);
  EXPECT_EQ(One(Key("w"), window, 0).remaining, 1000 - kThreads * kEach);
}

// count_on (docs/configuration.md "Counting chosen outcomes"): every request
// is charged when admitted and the outcomes that do not count are refunded,
// so at most the limit of counted outcomes gets through however many arrive
// at once. Concurrent admissions of a 5-token bucket: exactly 5 admitted;
// refunding the 3 that did not count lets exactly 3 more in.
TEST_P(SettleContractTest, CountOnChargesAtAdmissionAndRefundsTheUncounted) {
  const Limit l = SlowBucket(5);
  constexpr int kThreads = 4, kEach = 5;
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        if (One(Key("login"), l, 1).allowed) admitted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 5);
  std::vector<std::thread> refunds;
  for (int i = 0; i < 3; ++i) {
    refunds.emplace_back([&] { EXPECT_EQ(SettleOne(Key("login"), l, 0, 1).refunded, 1); });
  }
  for (auto& t : refunds) t.join();
  EXPECT_EQ(One(Key("login"), l, 0).remaining, 3);
  EXPECT_TRUE(One(Key("login"), l, 3).allowed);
  EXPECT_FALSE(One(Key("login"), l, 1).allowed);
}

// block_for's penalty box (src/policy/enforcer_block.cc): a burst-1 bucket
// refilling once per block period. Closing it takes its token exactly once
// under concurrent refusals; peeks (cost 0) then see it closed, with the
// retry time the whole period from the close, not from each peek.
TEST_P(SettleContractTest, PenaltyBoxClosesOnceAndHoldsForItsPeriod) {
  const Limit box = *Limit::Create({.algorithm = Algorithm::kTokenBucket,
                                    .count = 1,
                                    .period = std::chrono::minutes(15),
                                    .burst = 1});
  const Decision open = One(Key("box"), box, 0);
  EXPECT_EQ(open.remaining, 1);
  std::atomic<int> closed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      if (One(Key("box"), box, 1).allowed) closed.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(closed.load(), 1);
  for (int i = 0; i < 3; ++i) {
    const Decision peek = One(Key("box"), box, 0);
    EXPECT_EQ(peek.remaining, 0) << i;
    EXPECT_GT(peek.reset_after, std::chrono::seconds(890)) << i;
    EXPECT_LE(peek.reset_after, std::chrono::seconds(900)) << i;
  }
}

TEST_P(SettleContractTest, RefusesWhatItCannotSettle) {
  LimitSpec s;
  s.algorithm = Algorithm::kSlidingLog;
  s.burst = 5;
  s.window = std::chrono::seconds(10);
  const Limit log = *Limit::Create(s);
  const Limit ok = SlowBucket(5);
  // The items borrow their keys: keep them alive for the calls.
  const std::string a = Key("a"), log_key = Key("log");
  SettleItem items[] = {{a, &ok, 1, 0}, {log_key, &log, 1, 0}};
  auto r = store_->Settle(items);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  SettleItem negative{a, &ok, -1, 0};
  EXPECT_FALSE(store_->Settle(std::span<const SettleItem>(&negative, 1)).ok());
  // Nothing was charged by the refused call.
  EXPECT_EQ(One(Key("a"), ok, 0).remaining, 5);
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_SETTLE_CONTRACT_H_
