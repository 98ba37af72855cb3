#include "tollgate/local_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "period_cases.h"
#include "settle_contract.h"

namespace tollgate {
namespace {

constexpr int64_t kSec = 1'000'000'000;

std::unique_ptr<Store> MakeLocal() {
  LocalStoreOptions o;
  o.max_keys = 4096;
  auto s = LocalStore::Create(o);
  return s.ok() ? std::move(*s) : nullptr;
}

using testing::SettleContractTest;
using testing::StoreContractTest;
INSTANTIATE_TEST_SUITE_P(Local, StoreContractTest,
                         ::testing::Values(testing::StoreFactory(MakeLocal)));
INSTANTIATE_TEST_SUITE_P(Local, SettleContractTest,
                         ::testing::Values(testing::StoreFactory(MakeLocal)));

Limit Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

struct Fixture {
  explicit Fixture(size_t max_keys, OverflowPolicy overflow = OverflowPolicy::kReject) {
    LocalStoreOptions o;
    o.max_keys = max_keys;
    o.shards = 1;
    o.overflow = overflow;
    o.clock = &clock;
    store = std::move(*LocalStore::Create(o));
  }
  ManualClock clock;
  std::unique_ptr<LocalStore> store;
};

// Issue 17's counts per period, to the nanosecond (tests/period_cases.h).
TEST(LocalStoreTest, CountsPerPeriodAreExactToTheNanosecond) {
  Fixture f(64);
  testing::ExpectPeriodsExactOnStore(*f.store, f.clock, "period:");
}

// Quotas up to 2^40 a window, on the wall clock's grid like Redis (a daily
// window turns at 00:00 UTC, not a day after the store started).
TEST(LocalStoreTest, QuotasUpTo2To40CountExactlyOnWallClockWindows) {
  Fixture f(64);
  testing::ExpectQuotasExactOnStore(*f.store, f.clock, "quota:");
  // A store created in the middle of a window shares its boundaries.
  ManualClock clock(1'000'000'000'000LL, 1'700'000'000'000'000'000LL + 12345);
  LocalStoreOptions o;
  o.max_keys = 64;
  o.clock = &clock;
  auto store = LocalStore::Create(o);
  ASSERT_TRUE(store.ok());
  testing::ExpectQuotasExactOnStore(**store, clock, "quota:");
}

// Calendar quotas: local days (23 h, 25 h), a week, months in a zone.
TEST(LocalStoreTest, CalendarQuotasResetAtLocalBoundaries) {
  Fixture f(64);
  testing::ExpectCalendarQuotasOnStore(*f.store, f.clock, "calendar:");
}

TEST(LocalStoreTest, RefillsOnTheInjectedClock) {
  Fixture f(100);
  const Limit l = Bucket(10, 2);
  EXPECT_TRUE(f.store->Acquire("k", l, 2).allowed);
  Decision d = f.store->Acquire("k", l, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos(100'000'000));
  f.clock.Advance(Nanos(100'000'000));
  EXPECT_TRUE(f.store->Acquire("k", l, 1).allowed);
}

// Key administration on what only the local store holds (a sliding log) and
// on a leaky bucket; the contract suite covers buckets and windows everywhere.
TEST(LocalStoreTest, ResetAndSetRemainingOnASlidingLogAndALeakyBucket) {
  Fixture f(100);
  LimitSpec log_spec;
  log_spec.algorithm = Algorithm::kSlidingLog;
  log_spec.burst = 4;
  log_spec.window = std::chrono::seconds(10);
  LimitSpec leaky_spec;
  leaky_spec.algorithm = Algorithm::kLeakyBucket;
  leaky_spec.rate = 1;
  leaky_spec.burst = 4;
  for (const Limit& l : {*Limit::Create(log_spec), *Limit::Create(leaky_spec)}) {
    SCOPED_TRACE(std::string(AlgorithmName(l.algorithm())));
    const std::string k = "admin-" + std::string(AlgorithmName(l.algorithm()));
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(f.store->Acquire(k, l, 1).allowed);
    ASSERT_FALSE(f.store->Acquire(k, l, 1).allowed);
    ASSERT_TRUE(f.store->ResetKey(k, l).ok());
    EXPECT_EQ(f.store->Acquire(k, l, 0).remaining, 4);
    auto set = f.store->SetRemaining(k, l, 1);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(set->remaining, 1);
    EXPECT_TRUE(f.store->Acquire(k, l, 1).allowed);
    Decision d = f.store->Acquire(k, l, 1);
    EXPECT_FALSE(d.allowed);
    // The set's charge refills (or leaves the log) like a decision's.
    f.clock.Advance(d.retry_after);
    EXPECT_TRUE(f.store->Acquire(k, l, 1).allowed);
    EXPECT_EQ(f.store->SetRemaining(k, l, 5).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(LocalStoreTest, PreparedKeysShareTheKeysBucket) {
  Fixture f(100);
  const Limit l = Bucket(1, 3);
  const auto prepared = f.store->Prepare("user-7");
  EXPECT_TRUE(f.store->AcquireAt(prepared, l, 2, f.clock.Now()).allowed);
  EXPECT_TRUE(f.store->Acquire("user-7", l, 1).allowed);
  EXPECT_FALSE(f.store->AcquireAt(prepared, l, 1, f.clock.Now()).allowed);
  EXPECT_TRUE(f.store->AcquireAt(f.store->Prepare("user-8"), l, 3, f.clock.Now()).allowed);
}

TEST(LocalStoreTest, RejectsInvalidOptions) {
  LocalStoreOptions o;
  o.max_keys = 0;
  EXPECT_FALSE(LocalStore::Create(o).ok());
  o.max_keys = 10;
  o.clock = nullptr;
  EXPECT_FALSE(LocalStore::Create(o).ok());
}

TEST(LocalStoreTest, FullBucketsAreReclaimedToMakeRoom) {
  Fixture f(32);
  const Limit l = Bucket(10, 1);
  for (int i = 0; i < 32; ++i) ASSERT_TRUE(f.store->Acquire("k" + std::to_string(i), l, 1).allowed);
  // Every key is in debt for 100 ms: a new key finds no room.
  EXPECT_FALSE(f.store->Acquire("new", l, 1).allowed);
  EXPECT_GE(f.store->Stats().overflow_rejected, 1u);
  // Once they refill, they carry no information and make room.
  f.clock.Advance(Nanos(kSec));
  EXPECT_TRUE(f.store->Acquire("new", l, 1).allowed);
  EXPECT_GE(f.store->Stats().reclaimed, 1u);
  EXPECT_LE(f.store->Stats().keys, 32u);
}

TEST(LocalStoreTest, ThrottledClientsAreNeverHandedAFreshBucket) {
  Fixture f(16);
  const Limit l = Bucket(1, 1);
  ASSERT_TRUE(f.store->Acquire("throttled", l, 1).allowed);
  // A flood of new identities cannot evict the throttled key.
  for (int i = 0; i < 1000; ++i) f.store->Acquire("flood" + std::to_string(i), l, 1);
  EXPECT_FALSE(f.store->Acquire("throttled", l, 1).allowed);
  EXPECT_LE(f.store->Stats().keys, 16u);
}

TEST(LocalStoreTest, OverflowPolicyAllowCountsAndAllows) {
  Fixture f(8, OverflowPolicy::kAllow);
  const Limit l = Bucket(1, 1);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(f.store->Acquire("k" + std::to_string(i), l, 1).allowed);
  int allowed = 0;
  for (int i = 0; i < 50; ++i) allowed += f.store->Acquire("x" + std::to_string(i), l, 1).allowed;
  EXPECT_EQ(allowed, 50);
  EXPECT_GT(f.store->Stats().overflow_allowed, 0u);
}

TEST(LocalStoreTest, WindowAndLogAlgorithmsThroughTheStore) {
  Fixture f(100);
  LimitSpec s;
  s.algorithm = Algorithm::kFixedWindow;
  s.burst = 2;
  s.window = std::chrono::seconds(1);
  const Limit fixed = *Limit::Create(s);
  s.algorithm = Algorithm::kSlidingLog;
  const Limit log = *Limit::Create(s);
  for (const Limit* l : {&fixed, &log}) {
    const std::string key(AlgorithmName(l->algorithm()));
    EXPECT_TRUE(f.store->Acquire(key, *l, 1).allowed);
    EXPECT_TRUE(f.store->Acquire(key, *l, 1).allowed);
    EXPECT_FALSE(f.store->Acquire(key, *l, 1).allowed);
  }
  f.clock.Advance(Nanos(kSec));
  EXPECT_TRUE(f.store->Acquire("fixed_window", fixed, 1).allowed);
  EXPECT_TRUE(f.store->Acquire("sliding_log", log, 1).allowed);
}

// Window indexes are stored modulo 2^24 (sliding) or 2^40 (fixed). A key idle
// for 1.5 * 2^23 windows reads as "stored window ahead" (a clock step back)
// unless the store sees that the state is past its idle time.
TEST(LocalStoreTest, LongIdleWindowKeyIsFreshNotAClockStepBack) {
  Fixture f(100);
  LimitSpec s;
  s.burst = 2;
  s.window = std::chrono::milliseconds(1);
  for (Algorithm a : {Algorithm::kSlidingWindow, Algorithm::kFixedWindow}) {
    s.algorithm = a;
    const Limit l = *Limit::Create(s);
    const std::string key(AlgorithmName(a));
    EXPECT_TRUE(f.store->Acquire(key, l, 2).allowed) << key;
    EXPECT_FALSE(f.store->Acquire(key, l, 1).allowed) << key;
  }
  f.clock.Advance(std::chrono::milliseconds(int64_t{3} << 22));
  for (Algorithm a : {Algorithm::kSlidingWindow, Algorithm::kFixedWindow}) {
    s.algorithm = a;
    const Limit l = *Limit::Create(s);
    const std::string key(AlgorithmName(a));
    const Decision d = f.store->Acquire(key, l, 2);
    EXPECT_TRUE(d.allowed) << key;
    EXPECT_EQ(d.remaining, 0) << key;
    EXPECT_FALSE(f.store->Acquire(key, l, 1).allowed) << key;
  }
}

TEST(LocalStoreTest, BatchMixesAlgorithmsAllOrNothing) {
  Fixture f(100);
  LimitSpec s;
  s.algorithm = Algorithm::kSlidingLog;
  s.burst = 1;
  s.window = std::chrono::seconds(10);
  const Limit log = *Limit::Create(s);
  const Limit bucket = Bucket(1, 5);
  ASSERT_TRUE(f.store->Acquire("log", log, 1).allowed);
  AcquireItem items[] = {{"bucket", &bucket, 1}, {"log", &log, 1}};
  auto r = f.store->Acquire(items);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->denied_index, 1);
  EXPECT_EQ(f.store->Acquire("bucket", bucket, 0).remaining, 5);
}

TEST(LocalStoreTest, MemoryPerKeyIsBounded) {
  LocalStoreOptions o;
  o.max_keys = 1 << 20;
  auto s = LocalStore::Create(o);
  ASSERT_TRUE(s.ok());
  const auto st = (*s)->Stats();
  // 32-byte slots (and each slot's 2-byte rule) at a 3/4 load factor, allocated once.
  EXPECT_LE(static_cast<double>(st.bytes) / o.max_keys, 50.0);
  EXPECT_EQ(st.keys, 0u);
}

TEST(LocalStoreTest, ClearForgetsEverything) {
  Fixture f(10);
  const Limit l = Bucket(1, 1);
  ASSERT_TRUE(f.store->Acquire("k", l, 1).allowed);
  f.store->Clear();
  EXPECT_EQ(f.store->Stats().keys, 0u);
  EXPECT_TRUE(f.store->Acquire("k", l, 1).allowed);
}

// Limits of every kind, so the tests below cover the token bucket fast path
// and the general one.
std::vector<Limit> MixedLimits() {
  std::vector<Limit> limits = {Bucket(10, 3), Bucket(1e6, 1000)};
  LimitSpec shaper;
  shaper.algorithm = Algorithm::kLeakyBucket;
  shaper.rate = 5;
  shaper.burst = 4;
  shaper.max_delay = Nanos(kSec);
  limits.push_back(*Limit::Create(shaper));
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindow, Algorithm::kSlidingLog}) {
    LimitSpec w;
    w.algorithm = a;
    w.burst = 4;
    w.window = Nanos(kSec);
    limits.push_back(*Limit::Create(w));
  }
  return limits;
}

// AcquireEach prefetches a group of keys before deciding it: the decisions
// must be exactly those of one AcquireAt per item, in order, including
// repeated keys inside a group, new keys, costs 0 and above burst.
TEST(LocalStoreTest, AcquireEachDecidesLikeOneAtATime) {
  Fixture each(1000), single(1000);
  const std::vector<Limit> limits = MixedLimits();
  std::vector<std::string> keys;
  std::vector<AcquireItem> items;
  for (int i = 0; i < 150; ++i) keys.push_back("user-" + std::to_string(i % 37));
  for (int i = 0; i < 150; ++i) {
    const int64_t cost = i % 11 == 0 ? 0 : (i % 13 == 0 ? 5000 : 1 + i % 2);
    // A key keeps its limit: each key's bucket sees one algorithm.
    items.push_back({keys[i], &limits[(i % 37) % limits.size()], cost});
  }
  std::vector<Decision> out(items.size());
  for (int round = 0; round < 4; ++round) {
    const int64_t now = each.clock.Now() + round * 150'000'000;
    ASSERT_TRUE(each.store->AcquireEachAt(items, out, now).ok());
    for (size_t i = 0; i < items.size(); ++i) {
      const Decision d = single.store->AcquireAt(items[i].key, *items[i].limit, items[i].cost, now);
      EXPECT_EQ(out[i], d) << "round " << round << " item " << i;
    }
  }
  EXPECT_EQ(each.store->Stats().keys, single.store->Stats().keys);
}

TEST(LocalStoreTest, AcquireEachRejectsBadInputBeforeCharging) {
  Fixture f(100);
  const Limit l = Bucket(1, 1);
  std::vector<AcquireItem> items = {{"a", &l, 1}, {"b", &l, 1}};
  std::vector<Decision> out(1);
  EXPECT_EQ(f.store->AcquireEach(items, out).code(), StatusCode::kInvalidArgument);
  out.resize(2);
  items[1].cost = -1;
  EXPECT_EQ(f.store->AcquireEach(items, out).code(), StatusCode::kInvalidArgument);
  items[1].limit = nullptr;
  items[1].cost = 1;
  EXPECT_EQ(f.store->AcquireEach(items, out).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(f.store->Acquire("a", l, 1).allowed);  // nothing was charged
  items[1].limit = &l;
  ASSERT_TRUE(f.store->AcquireEach(items, out).ok());
  EXPECT_FALSE(out[0].allowed);
  EXPECT_TRUE(out[1].allowed);
}

// A batch over more keys than the hash buffer holds inline (prefetched, then
// decided): all-or-nothing, and when everything fits each item's decision is
// what deciding it alone would have said.
TEST(LocalStoreTest, LargeBatchesDecideLikeSingleCalls) {
  Fixture batch(1000), single(1000);
  const std::vector<Limit> limits = MixedLimits();
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back("k" + std::to_string(i));
  std::vector<AcquireItem> items;
  for (int i = 0; i < 40; ++i) items.push_back({keys[i], &limits[i % limits.size()], 1});
  const int64_t now = batch.clock.Now();
  auto r = batch.store->AcquireAt(items, now);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->allowed);
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(r->decisions[i], single.store->AcquireAt(items[i].key, *items[i].limit, 1, now))
        << "item " << i;
  }
  // One item that cannot fit: nothing is charged, the others report their state.
  items.push_back({"too-much", &limits[0], 4});
  r = batch.store->AcquireAt(items, now);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->denied_index, 40);
  for (size_t i = 0; i < 40; ++i) {
    const Decision peek = single.store->AcquireAt(items[i].key, *items[i].limit, 0, now);
    EXPECT_EQ(r->decisions[i].remaining, peek.remaining) << "item " << i;
  }
}

}  // namespace
}  // namespace tollgate
