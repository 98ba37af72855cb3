// Limiter over a LocalStore driven by a ManualClock: no test sleeps. WaitAcquire
// waits through a Waiter that advances the same clock.
#include "tollgate/limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace tollgate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Waits by moving the manual clock forward; records what it was asked.
class AdvancingWaiter final : public Waiter {
 public:
  explicit AdvancingWaiter(ManualClock& clock) : clock_(clock) {}
  void Wait(Nanos d) override {
    std::lock_guard<std::mutex> lock(mu_);
    waits_.push_back(d);
    clock_.Advance(d);
  }
  std::vector<Nanos> waits() {
    std::lock_guard<std::mutex> lock(mu_);
    return waits_;
  }

 private:
  ManualClock& clock_;
  std::mutex mu_;
  std::vector<Nanos> waits_;
};

struct Fixture {
  explicit Fixture(LimitSpec spec) : waiter(clock) {
    LimiterOptions o;
    o.limit = spec;
    o.local.max_keys = 1024;
    o.local.clock = &clock;
    o.clock = &clock;
    o.waiter = &waiter;
    auto l = Limiter::Create(o);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) limiter = std::move(*l);
  }
  ManualClock clock;
  AdvancingWaiter waiter;
  std::unique_ptr<Limiter> limiter;
};

LimitSpec Bucket(double rate, int64_t burst) { return {.rate = rate, .burst = burst}; }

TEST(LimiterTest, AcquireChargesAndRefillsOnTheClock) {
  Fixture f(Bucket(10, 3));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(f.limiter->Acquire("u1")->allowed);
  const auto d = f.limiter->Acquire("u1");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after, milliseconds(100));
  EXPECT_TRUE(f.limiter->Acquire("u2")->allowed) << "keys are independent";
  f.clock.Advance(milliseconds(100));
  EXPECT_TRUE(f.limiter->Acquire("u1")->allowed);
}

TEST(LimiterTest, TryAcquireReportsTheDecision) {
  Fixture f(Bucket(1, 5));
  Decision d;
  EXPECT_TRUE(f.limiter->TryAcquire("k", 4, &d));
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.limit, 5);
  EXPECT_FALSE(f.limiter->TryAcquire("k", 2, &d));
  EXPECT_EQ(d.retry_after, seconds(1));
  EXPECT_TRUE(f.limiter->TryAcquire("k", 0, &d)) << "cost 0 peeks";
  EXPECT_EQ(d.remaining, 1);
  Status error;
  EXPECT_FALSE(f.limiter->TryAcquire("k", -1, &d, &error));
  EXPECT_EQ(error.code(), StatusCode::kInvalidArgument);
}

TEST(LimiterTest, AsyncOnLocalRunsInline) {
  Fixture f(Bucket(1, 1));
  int calls = 0;
  f.limiter->AcquireAsync("k", 1, [&](Result<Decision> r) {
    ++calls;
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->allowed);
  });
  f.limiter->AcquireAsync("k", 1, [&](Result<Decision> r) {
    ++calls;
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->allowed);
  });
  EXPECT_EQ(calls, 2);
}

TEST(LimiterTest, WaitAcquireWaitsExactlyUntilTheCostFits) {
  Fixture f(Bucket(10, 2));
  const int64_t start = f.clock.Now();
  for (int i = 0; i < 6; ++i) {
    auto d = f.limiter->WaitAcquire("k", 1, seconds(5));
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(d->allowed);
  }
  // Two from the burst, then four at 10/s: 400 ms of waiting, never more.
  EXPECT_EQ(Nanos(f.clock.Now() - start), milliseconds(400));
  for (Nanos w : f.waiter.waits()) EXPECT_EQ(w, milliseconds(100));
}

TEST(LimiterTest, WaitAcquireGivesUpWithoutWaitingInVain) {
  Fixture f(Bucket(1, 1));
  ASSERT_TRUE(f.limiter->Acquire("k")->allowed);
  auto d = f.limiter->WaitAcquire("k", 1, milliseconds(500));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after, seconds(1));
  EXPECT_TRUE(f.waiter.waits().empty()) << "a wait past the budget is not even started";
  // Never-fitting costs return at once.
  auto never = f.limiter->WaitAcquire("k", 2, seconds(100));
  ASSERT_TRUE(never.ok());
  EXPECT_FALSE(never->allowed);
  EXPECT_EQ(never->retry_after, Decision::kNever);
  EXPECT_TRUE(f.waiter.waits().empty());
}

TEST(LimiterTest, WaitAcquireWaitsTheShaperDelay) {
  LimitSpec spec;
  spec.algorithm = Algorithm::kLeakyBucket;
  spec.rate = 10;
  spec.burst = 5;
  spec.max_delay = milliseconds(300);
  Fixture f(spec);
  std::vector<Nanos> delays;
  for (int i = 0; i < 4; ++i) {
    auto d = f.limiter->WaitAcquire("k", 1, seconds(1));
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(d->allowed);
    delays.push_back(d->delay);
  }
  // The shaper spaces grants by 100 ms; WaitAcquire waited each delay out.
  const auto waits = f.waiter.waits();
  Nanos waited{0};
  for (Nanos w : waits) waited += w;
  Nanos asked{0};
  for (Nanos d : delays) asked += d;
  EXPECT_GT(asked, Nanos(0));
  EXPECT_EQ(waited, asked);
}

TEST(LimiterTest, LimitersSharingAStoreKeepSeparateBuckets) {
  ManualClock clock;
  auto store = MakeStore("local://?max_keys=128&shards=1", &clock);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  LimiterOptions a{.limit = Bucket(1, 1), .name = "a", .store = *store};
  LimiterOptions b{.limit = Bucket(1, 1), .name = "b", .store = *store};
  auto la = Limiter::Create(a);
  auto lb = Limiter::Create(b);
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_TRUE((*la)->TryAcquire("k"));
  EXPECT_TRUE((*lb)->TryAcquire("k"));
  EXPECT_FALSE((*la)->TryAcquire("k"));
  EXPECT_EQ((*la)->StoreKey("k"), "a/k");
  EXPECT_EQ(&(*la)->store(), store->get());
}

TEST(LimiterTest, CreateValidates) {
  EXPECT_EQ(Limiter::Create({.limit = Bucket(0, 1)}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Limiter::Create({.limit = Bucket(1, 1), .name = "a/b"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Limiter::Create({.limit = Bucket(1, 1), .name = ""}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(LimiterTest, MakeStoreUrls) {
  EXPECT_TRUE(MakeStore("local").ok());
  EXPECT_FALSE(MakeStore("local://?max_keys=0").ok());
  EXPECT_FALSE(MakeStore("local://?bogus=1").ok());
  EXPECT_FALSE(MakeStore("memcached://x").ok());
}

// Many threads on one hot key never get more than burst + rate * elapsed.
TEST(LimiterConcurrencyTest, NeverOverGrantsUnderContention) {
  Fixture f(Bucket(1000, 50));
  std::atomic<int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (f.limiter->TryAcquire("hot")) granted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 50) << "the manual clock did not move: exactly the burst";
}

}  // namespace
}  // namespace tollgate
