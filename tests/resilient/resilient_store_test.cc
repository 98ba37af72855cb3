#include "tollgate/resilient_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "resilient/degraded_limit.h"
#include "resilient/fake_store.h"
#include "settle_contract.h"
#include "testing/timing.h"
#include "tollgate/local_store.h"
#include "tollgate/time_zone.h"

namespace tollgate {
namespace {

// The store contract holds for ResilientStore over a healthy primary: it
// passes every answer through (over Redis: resilient_outage_test).
std::unique_ptr<Store> MakeResilientOverLocal() {
  LocalStoreOptions lo;
  lo.max_keys = 4096;
  auto local = LocalStore::Create(lo);
  if (!local.ok()) return nullptr;
  auto s = ResilientStore::Create(std::move(*local), ResilientStoreOptions{});
  return s.ok() ? std::move(*s) : nullptr;
}
using testing::SettleContractTest;
using testing::StoreContractTest;
INSTANTIATE_TEST_SUITE_P(ResilientOverLocal, StoreContractTest,
                         ::testing::Values(testing::StoreFactory(MakeResilientOverLocal)));
INSTANTIATE_TEST_SUITE_P(ResilientOverLocal, SettleContractTest,
                         ::testing::Values(testing::StoreFactory(MakeResilientOverLocal)));

using std::chrono::milliseconds;
using testing::FakeStore;

Limit Bucket(int64_t burst, double rate = 0.001) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

class FixedFleet final : public FleetRegistry {
 public:
  explicit FixedFleet(int64_t n) : n_(n) {}
  Result<int64_t> Heartbeat() override { return n_; }

 private:
  int64_t n_;
};

class ResilientStoreTest : public ::testing::Test {
 protected:
  ResilientStoreOptions Options(FailureMode mode) {
    ResilientStoreOptions o;
    o.mode = mode;
    o.background = false;
    o.clock = &clock_;
    o.breaker.clock = &clock_;
    o.breaker.consecutive_failures = 3;
    o.breaker.open_duration = milliseconds(100);
    return o;
  }
  void Make(ResilientStoreOptions o) {
    auto fake = std::make_unique<FakeStore>(&clock_);
    fake_ = fake.get();
    auto r = ResilientStore::Create(std::move(fake), std::move(o));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    store_ = std::move(*r);
  }
  Result<Decision> One(std::string_view key, const Limit& l, int64_t cost = 1) {
    return AcquireOne(*store_, key, l, cost);
  }
  Result<BatchDecision> Batch(std::span<const AcquireItem> items) { return store_->Acquire(items); }
  // Lets the breaker probe (RunMaintenance sends the due probe) and close again
  // against a healthy primary; then peeks `key` through the primary.
  void Recover(std::string_view key, const Limit& l) {
    fake_->fail = StatusCode::kOk;
    clock_.Advance(milliseconds(100));
    store_->RunMaintenance();
    ASSERT_EQ(store_->breaker().state(), BreakerState::kClosed);
    ASSERT_TRUE(One(key, l, 0).ok());
  }
  int CountAllowed(std::string_view key, const Limit& l, int n) {
    int allowed = 0;
    for (int i = 0; i < n; ++i) {
      auto r = One(key, l);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      allowed += r.ok() && r->allowed;
    }
    return allowed;
  }

  ManualClock clock_;
  FakeStore* fake_ = nullptr;
  std::unique_ptr<ResilientStore> store_;
};

TEST_F(ResilientStoreTest, CreateValidatesOptions) {
  auto o = Options(FailureMode::kOpen);
  o.degrade_fraction = 0;
  EXPECT_FALSE(ResilientStore::Create(std::make_unique<FakeStore>(&clock_), std::move(o)).ok());
  auto p = Options(FailureMode::kOpen);
  p.breaker.half_open_probes = 0;
  EXPECT_FALSE(ResilientStore::Create(std::make_unique<FakeStore>(&clock_), std::move(p)).ok());
  EXPECT_FALSE(ResilientStore::Create(nullptr, Options(FailureMode::kOpen)).ok());
}

// Front ends choose CheckAsync by this capability (never by Name()): the
// wrapper answers what its primary is.
TEST_F(ResilientStoreTest, IsAsyncNativeExactlyWhenItsPrimaryIs) {
  for (bool native : {false, true}) {
    auto fake = std::make_unique<FakeStore>(&clock_);
    fake->async_native = native;
    auto r = ResilientStore::Create(std::move(fake), Options(FailureMode::kOpen));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->AsyncNative(), native);
  }
  LocalStoreOptions o;
  o.max_keys = 16;
  EXPECT_FALSE((*LocalStore::Create(o))->AsyncNative());
}

TEST_F(ResilientStoreTest, PassesThroughWhileHealthy) {
  Make(Options(FailureMode::kOpen));
  const Limit l = Bucket(2);
  EXPECT_EQ(CountAllowed("r\x1fk", l, 5), 2);
  EXPECT_EQ(store_->Stats().primary_decisions, 5u);
  EXPECT_EQ(store_->Name(), "resilient(fake)");
  AcquireItem item{"r\x1fk", &l, 1};
  auto r = Batch({&item, 1});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->enforced);
}

TEST_F(ResilientStoreTest, OpenModeAllowsUnenforcedAndChangesNothing) {
  Make(Options(FailureMode::kOpen));
  const Limit l = Bucket(3);
  ASSERT_EQ(CountAllowed("r\x1fk", l, 1), 1);
  fake_->fail = StatusCode::kConnection;
  for (int i = 0; i < 20; ++i) {
    AcquireItem item{"r\x1fk", &l, 1};
    auto r = Batch({&item, 1});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->allowed);
    EXPECT_FALSE(r->enforced);
    EXPECT_EQ(r->decisions[0].remaining, 3);
  }
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 2);  // nothing charged
  Recover("r\x1fk", l);
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 2);  // and no charge-back either
  EXPECT_EQ(store_->Stats().open_decisions, 20u);
}

TEST_F(ResilientStoreTest, ClosedModeAnswersUnavailable) {
  Make(Options(FailureMode::kClosed));
  const Limit l = Bucket(3);
  fake_->fail = StatusCode::kTimeout;
  for (int i = 0; i < 5; ++i) {
    auto r = One("r\x1fk", l);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(store_->breaker().state(), BreakerState::kOpen);
  EXPECT_FALSE(store_->Healthy());
  EXPECT_EQ(store_->Stats().closed_rejections, 5u);
}

TEST_F(ResilientStoreTest, BreakerKeepsCallsFromThePrimary) {
  Make(Options(FailureMode::kOpen));
  const Limit l = Bucket(3);
  // Connection errors: the streak opens the breaker (a timeout from a primary
  // that never answered would open it at once).
  fake_->fail = StatusCode::kConnection;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(One("r\x1fk", l).ok());
  EXPECT_EQ(fake_->calls.load(), 3);  // the threshold, then none
  EXPECT_EQ(store_->Stats().short_circuited, 97u);
  clock_.Advance(milliseconds(100));
  // A probe is due, but client calls never probe: they are answered at once.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(One("r\x1fk", l).ok());
  EXPECT_EQ(fake_->calls.load(), 3);
  EXPECT_EQ(store_->Stats().short_circuited, 107u);
  store_->RunMaintenance();  // one probe, which fails
  EXPECT_EQ(fake_->calls.load(), 4);
  EXPECT_EQ(store_->breaker().state(), BreakerState::kOpen);
  EXPECT_EQ(store_->Stats().breaker.probes, 1u);
  store_->RunMaintenance();  // not due again before another open_duration
  EXPECT_EQ(fake_->calls.load(), 4);
  Recover("r\x1fk", l);
  EXPECT_TRUE(store_->Healthy());
  EXPECT_EQ(store_->Stats().breaker.probes, 2u);
}

// The probe is a zero-cost peek on the reserved probe key: it changes no state.
TEST_F(ResilientStoreTest, ProbeIsAZeroCostPeekOnTheProbeKey) {
  auto o = Options(FailureMode::kOpen);
  o.probe_key = "probe\x1fkey";
  Make(std::move(o));
  const Limit l = Bucket(3);
  fake_->fail = StatusCode::kConnection;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(One("r\x1fk", l).ok());
  ASSERT_EQ(store_->breaker().state(), BreakerState::kOpen);
  fake_->fail = StatusCode::kOk;
  clock_.Advance(milliseconds(100));
  store_->RunMaintenance();
  EXPECT_EQ(store_->breaker().state(), BreakerState::kClosed);
  EXPECT_EQ(fake_->calls.load(), 4);
  const Limit one = Bucket(1);
  EXPECT_EQ(fake_->Peek("probe\x1fkey", one).remaining, 1);  // nothing charged
  EXPECT_EQ(store_->Stats().primary_decisions, 0u);          // not a client decision
}

// A primary that never answered has answered nothing since any call was sent:
// its first timeout opens the breaker at once, even one sent in the instant of
// Create (the clock does not move here).
TEST_F(ResilientStoreTest, ATimeoutFromAPrimaryThatNeverAnsweredOpensAtOnce) {
  Make(Options(FailureMode::kOpen));
  const Limit l = Bucket(3);
  fake_->fail = StatusCode::kTimeout;
  ASSERT_TRUE(One("r\x1fk", l).ok());
  EXPECT_EQ(store_->breaker().state(), BreakerState::kOpen);
  EXPECT_EQ(store_->Stats().breaker.opened_by_no_answer, 1u);
  EXPECT_EQ(fake_->calls.load(), 1);
}

// A timeout after which the primary answered nothing since the call was sent
// opens the breaker at once; a timeout with answers since only adds to the streak.
TEST_F(ResilientStoreTest, ATimeoutWithNoAnswerSinceTheCallOpensAtOnce) {
  Make(Options(FailureMode::kOpen));
  const Limit l = Bucket(3);
  ASSERT_TRUE(One("r\x1fk", l).ok());  // an answer, at the call's own start time
  fake_->fail = StatusCode::kTimeout;
  ASSERT_TRUE(One("r\x1fk", l).ok());  // sent when the last answer came: only the streak
  EXPECT_EQ(store_->breaker().state(), BreakerState::kClosed);
  clock_.Advance(milliseconds(1));
  ASSERT_TRUE(One("r\x1fk", l).ok());  // sent 1 ms after the last answer, no answer since
  EXPECT_EQ(store_->breaker().state(), BreakerState::kOpen);
  EXPECT_EQ(store_->Stats().breaker.opened_by_no_answer, 1u);
  EXPECT_EQ(fake_->calls.load(), 3);
  // A connection error (no waiting) never opens it early: the streak decides.
  Recover("r\x1fk", l);
  clock_.Advance(milliseconds(1));
  fake_->fail = StatusCode::kConnection;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(One("r\x1fk", l).ok());
  EXPECT_EQ(store_->breaker().state(), BreakerState::kClosed);
  ASSERT_TRUE(One("r\x1fk", l).ok());
  EXPECT_EQ(store_->breaker().state(), BreakerState::kOpen);
  EXPECT_EQ(store_->Stats().breaker.opened_by_consecutive, 1u);
}

TEST_F(ResilientStoreTest, CallerErrorsPassThroughWithoutOpening) {
  Make(Options(FailureMode::kOpen));
  const Limit l = Bucket(3);
  fake_->fail = StatusCode::kInvalidArgument;
  for (int i = 0; i < 10; ++i) {
    auto r = One("r\x1fk", l);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(store_->breaker().state(), BreakerState::kClosed);
}

// Key administration goes to the primary, never to a failure mode: while the
// breaker is open it is refused (kUnavailable) and the primary is not called;
// a reset still forgets the degraded local bucket, so the customer is served
// again during the outage.
TEST_F(ResilientStoreTest, KeyAdministrationIsRefusedWhileTheBreakerIsOpen) {
  Make(Options(FailureMode::kDegrade));
  const Limit l = Bucket(10);
  ASSERT_TRUE(store_->SetRemaining("r\x1fk", l, 2).ok());
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 2);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 20), 5);  // degraded: the local share, spent
  ASSERT_EQ(store_->breaker().state(), BreakerState::kOpen);
  const int calls = fake_->calls.load();
  auto set = store_->SetRemaining("r\x1fk", l, 10);
  EXPECT_EQ(set.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(set.status().message().find("the key was not changed"), std::string::npos);
  EXPECT_EQ(store_->ResetKey("r\x1fk", l).code(), StatusCode::kUnavailable);
  EXPECT_EQ(fake_->calls.load(), calls);
  EXPECT_EQ(CountAllowed("r\x1fk", l, 20), 5);  // the degraded bucket was forgotten
  Recover("r\x1fk", l);
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 2);  // the primary's is as it was
  ASSERT_TRUE(store_->ResetKey("r\x1fk", l).ok());
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 10);
  // Out of range is the caller's error whatever the breaker says.
  EXPECT_EQ(store_->SetRemaining("r\x1fk", l, 11).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ResilientStoreTest, DegradeDecidesAtTheFraction) {
  Make(Options(FailureMode::kDegrade));
  const Limit l = Bucket(10);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 20), 5);
  auto r = One("r\x1fk", l);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->limit, 5);  // headers tell the reduced limit
  EXPECT_GT(r->retry_after.count(), 0);
  AcquireItem item{"r\x1fother", &l, 1};
  auto b = Batch({&item, 1});
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->enforced);
  EXPECT_EQ(store_->Stats().degraded_decisions, 22u);
}

// Leases pass through while the primary answers; in an outage the store's
// mode answers: open admits without a lease, closed refuses, degrade holds
// leases locally at the share and releases them there.
TEST_F(ResilientStoreTest, LeasesPassThroughAndFollowTheModeInAnOutage) {
  const LeaseLimit limit = *LeaseLimit::Create(4, std::chrono::seconds(30));
  for (FailureMode mode : {FailureMode::kOpen, FailureMode::kClosed, FailureMode::kDegrade}) {
    SCOPED_TRACE(std::string(FailureModeName(mode)));
    Make(Options(mode));
    ASSERT_TRUE(store_->SupportsLeases());
    auto held = store_->AcquireLease("r\x1fk", limit);
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    EXPECT_TRUE(held->allowed && held->enforced);
    auto released = store_->ReleaseLease("r\x1fk", held->lease_id);
    ASSERT_TRUE(released.ok());
    EXPECT_TRUE(*released);

    fake_->fail = StatusCode::kConnection;
    auto down = store_->AcquireLease("r\x1fk", limit);
    if (mode == FailureMode::kClosed) {
      EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
      continue;
    }
    ASSERT_TRUE(down.ok()) << down.status().ToString();
    if (mode == FailureMode::kOpen) {
      EXPECT_TRUE(down->allowed);
      EXPECT_FALSE(down->enforced);
      EXPECT_TRUE(down->lease_id.empty());
      continue;
    }
    // Degrade: 4 x 0.5 = 2 local slots.
    EXPECT_TRUE(down->allowed && down->enforced);
    auto second = store_->AcquireLease("r\x1fk", limit);
    ASSERT_TRUE(second.ok());
    EXPECT_TRUE(second->allowed);
    auto third = store_->AcquireLease("r\x1fk", limit);
    ASSERT_TRUE(third.ok());
    EXPECT_FALSE(third->allowed);
    auto back = store_->ReleaseLease("r\x1fk", down->lease_id);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(*back) << "released in the local table while the primary is down";
    auto again = store_->AcquireLease("r\x1fk", limit);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->allowed);
  }
}

// A lease tagged with a failure mode (a rule's own, LeaseLimit::failure_mode)
// is answered by that mode in an outage, whatever the store's default; an
// untagged one by the default.
TEST_F(ResilientStoreTest, ALeaseTagOverridesTheStoreModeInAnOutage) {
  const LeaseLimit limit = *LeaseLimit::Create(4, std::chrono::seconds(30));
  Make(Options(FailureMode::kOpen));
  fake_->fail = StatusCode::kConnection;
  auto untagged = store_->AcquireLease("r\x1fk", limit);
  ASSERT_TRUE(untagged.ok()) << untagged.status().ToString();
  EXPECT_TRUE(untagged->allowed);
  EXPECT_FALSE(untagged->enforced) << "the store's default: open";
  auto closed = store_->AcquireLease("r\x1fk", limit.WithFailureMode(FailureMode::kClosed));
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
  // Degrade: 4 x 0.5 = 2 local slots, held and released locally.
  const LeaseLimit degrade = limit.WithFailureMode(FailureMode::kDegrade);
  auto first = store_->AcquireLease("r\x1fk", degrade);
  auto second = store_->AcquireLease("r\x1fk", degrade);
  auto third = store_->AcquireLease("r\x1fk", degrade);
  ASSERT_TRUE(first.ok() && second.ok() && third.ok());
  EXPECT_TRUE(first->allowed && first->enforced);
  EXPECT_TRUE(second->allowed);
  EXPECT_FALSE(third->allowed);
  EXPECT_TRUE(*store_->ReleaseLease("r\x1fk", first->lease_id));

  Make(Options(FailureMode::kClosed));
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(store_->AcquireLease("r\x1fk", limit).status().code(), StatusCode::kUnavailable);
  std::optional<Result<LeaseDecision>> open;
  store_->AcquireLeaseAsync("r\x1fk", limit.WithFailureMode(FailureMode::kOpen),
                            [&](Result<LeaseDecision> d) { open = std::move(d); });
  ASSERT_TRUE(open.has_value()) << "the fake primary answers inline";
  ASSERT_TRUE(open->ok()) << open->status().ToString();
  EXPECT_TRUE((*open)->allowed);
  EXPECT_FALSE((*open)->enforced) << "the tag (open) over the store's closed";
}

TEST_F(ResilientStoreTest, DegradeDividesByTheFleet) {
  auto o = Options(FailureMode::kDegrade);
  o.fleet = std::make_unique<FixedFleet>(4);
  Make(std::move(o));
  const Limit l = Bucket(40);
  store_->RunMaintenance();
  EXPECT_EQ(store_->Stats().instances, 4);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 20), 5);  // 40 * 0.5 / 4
}

TEST_F(ResilientStoreTest, DegradeKeepsAtLeastOneToken) {
  auto o = Options(FailureMode::kDegrade);
  o.initial_instances = 100;
  Make(std::move(o));
  const Limit l = Bucket(10);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 5), 1);
}

// Per-rule modes come from each item's failure_mode tag (the Enforcer sets it
// from the rule); untagged items get Options::mode. Keys are never parsed.
TEST_F(ResilientStoreTest, PerRuleModes) {
  Make(Options(FailureMode::kDegrade));
  const Limit l = Bucket(4);
  fake_->fail = StatusCode::kConnection;
  auto tagged = [&](std::string_view key, std::optional<FailureMode> mode) {
    AcquireItem item{key, &l, 1, mode};
    auto r = Batch({&item, 1});
    return r.ok() ? Result<Decision>(r->decisions.front()) : Result<Decision>(r.status());
  };
  auto open = tagged(
      "public\x1f"
      "1.2.3.4",
      FailureMode::kOpen);
  ASSERT_TRUE(open.ok());
  auto closed = tagged(
      "payments\x1f"
      "1.2.3.4",
      FailureMode::kClosed);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
  int allowed = 0;
  for (int i = 0; i < 5; ++i) {
    auto r = tagged(
        "other\x1f"
        "1.2.3.4",
        FailureMode::kDegrade);
    allowed += r.ok() && r->allowed;
  }
  EXPECT_EQ(allowed, 2);                               // degrade
  EXPECT_EQ(CountAllowed("nokeyseparator", l, 5), 2);  // untagged: the default, degrade
  // A key that names a closed rule but carries no tag is not refused: the
  // mode is never read from the key.
  EXPECT_EQ(CountAllowed("payments\x1f"
                         "5.6.7.8",
                         l, 5),
            2);

  // A batch with an open and a degrade item: decided locally, unenforced overall.
  const std::string a = "public\x1fz", b = "other\x1fz", c = "payments\x1fz";
  AcquireItem mixed[] = {{a, &l, 1, FailureMode::kOpen}, {b, &l, 1, FailureMode::kDegrade}};
  auto r = Batch(mixed);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->allowed);
  EXPECT_FALSE(r->enforced);
  EXPECT_EQ(r->decisions[1].limit, 2);
  ASSERT_TRUE(Batch(mixed)->allowed);
  auto denied = Batch(mixed);  // the degrade item's share (2) is used up
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->denied_index, 1);
  // The degrade mode enforces: its denial is an enforced rejection (429), not
  // an unenforced answer without state (which the policy layer turns into 503).
  EXPECT_TRUE(denied->enforced);
  EXPECT_FALSE(denied->decisions[1].allowed);
  AcquireItem with_closed[] = {{a, &l, 1, FailureMode::kOpen}, {c, &l, 1, FailureMode::kClosed}};
  EXPECT_EQ(Batch(with_closed).status().code(), StatusCode::kUnavailable);
}

TEST_F(ResilientStoreTest, ChargeBackKeepsTheClientLimited) {
  auto o = Options(FailureMode::kDegrade);
  o.degrade_fraction = 1.0;
  Make(std::move(o));
  const Limit l = Bucket(10);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 15), 10);
  EXPECT_EQ(store_->Stats().charge_back_pending_keys, 1u);
  Recover("r\x1fk", l);
  store_->RunMaintenance();
  auto s = store_->Stats();
  EXPECT_EQ(s.charge_back_tokens, 10u);
  EXPECT_EQ(s.charge_back_pending_keys, 0u);
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 0);
  auto after = One("r\x1fk", l);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->allowed);
}

TEST_F(ResilientStoreTest, WithoutChargeBackTheOutageIsForgotten) {
  auto o = Options(FailureMode::kDegrade);
  o.degrade_fraction = 1.0;
  o.charge_back = false;
  Make(std::move(o));
  const Limit l = Bucket(10);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 15), 10);
  Recover("r\x1fk", l);
  store_->RunMaintenance();
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 10);
}

TEST_F(ResilientStoreTest, ChargeBackDrainsWhatDoesNotFit) {
  auto o = Options(FailureMode::kDegrade);
  o.degrade_fraction = 1.0;
  Make(std::move(o));
  const Limit l = Bucket(10);
  EXPECT_EQ(CountAllowed("r\x1fk", l, 6), 6);  // 4 left at the primary
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 15), 10);  // the local bucket knew nothing
  Recover("r\x1fk", l);
  store_->RunMaintenance();
  auto s = store_->Stats();
  EXPECT_EQ(s.charge_back_tokens, 4u);
  EXPECT_EQ(s.charge_back_forgiven, 6u);
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 0);
}

TEST_F(ResilientStoreTest, SaturatingChargeIsUsedWhenGiven) {
  auto o = Options(FailureMode::kDegrade);
  std::vector<std::pair<std::string, int64_t>> charged;
  o.saturating_charge = [&](const AcquireItem& item) {
    charged.emplace_back(std::string(item.key), item.cost);
    return Status::Ok();
  };
  Make(std::move(o));
  const Limit l = Bucket(10);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 3), 3);
  Recover("r\x1fk", l);
  store_->RunMaintenance();
  ASSERT_EQ(charged.size(), 1u);
  EXPECT_EQ(charged[0].first, "r\x1fk");
  EXPECT_EQ(charged[0].second, 3);
}

TEST_F(ResilientStoreTest, FailedChargeBackIsKeptAndRetried) {
  auto o = Options(FailureMode::kDegrade);
  o.degrade_fraction = 1.0;
  Make(std::move(o));
  const Limit l = Bucket(10);
  fake_->fail = StatusCode::kConnection;
  EXPECT_EQ(CountAllowed("r\x1fk", l, 4), 4);
  Recover("r\x1fk", l);
  fake_->fail = StatusCode::kTimeout;  // down again before the charge-back ran
  store_->RunMaintenance();
  EXPECT_EQ(store_->Stats().charge_back_failures, 1u);
  EXPECT_EQ(store_->Stats().charge_back_pending_keys, 1u);
  fake_->fail = StatusCode::kOk;
  store_->RunMaintenance();
  EXPECT_EQ(store_->Stats().charge_back_tokens, 4u);
  EXPECT_EQ(fake_->Peek("r\x1fk", l).remaining, 6);
}

TEST_F(ResilientStoreTest, ChargeBackLedgerIsBounded) {
  auto o = Options(FailureMode::kDegrade);
  o.max_charge_back_keys = 2;
  Make(std::move(o));
  const Limit l = Bucket(10);
  fake_->fail = StatusCode::kConnection;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(CountAllowed("r\x1f" + std::to_string(i), l, 1), 1);
  auto s = store_->Stats();
  EXPECT_EQ(s.charge_back_pending_keys, 2u);
  EXPECT_EQ(s.charge_back_dropped, 3u);
}

TEST_F(ResilientStoreTest, AsyncFallsBackToo) {
  Make(Options(FailureMode::kOpen));
  const Limit l = Bucket(1);
  fake_->fail = StatusCode::kConnection;
  bool called = false;
  {
    std::string key = "r\x1fk";
    AcquireItem item{key, &l, 1};
    store_->AcquireAsync({&item, 1}, [&](Result<BatchDecision> r) {
      called = true;
      ASSERT_TRUE(r.ok());
      EXPECT_FALSE(r->enforced);
    });
  }
  EXPECT_TRUE(called);
}

TEST(DegradedLimitTest, ScalesEveryAlgorithm) {
  LimitSpec fw;
  fw.algorithm = Algorithm::kFixedWindow;
  fw.burst = 10;
  fw.window = std::chrono::seconds(1);
  auto w = resilient::ScaleLimit(*Limit::Create(fw), 0.5);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->burst(), 5);
  EXPECT_EQ(w->window_ns(), 1'000'000'000);
  LimitSpec tb;
  tb.rate = 100;
  tb.burst = 200;
  auto t = resilient::ScaleLimit(*Limit::Create(tb), 0.25);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->burst(), 50);
  EXPECT_EQ(t->rate_micro(), 25'000'000);
  EXPECT_FALSE(resilient::ScaleLimit(*Limit::Create(tb), 0).ok());
  // A calendar quota keeps its calendar (not a 25-hour window on the epoch's grid).
  LimitSpec cal;
  cal.algorithm = Algorithm::kFixedWindow;
  cal.burst = 10;
  cal.calendar = std::make_shared<Calendar>(CalendarUnit::kDay, TimeZone::Fixed("UTC", 0));
  auto c = resilient::ScaleLimit(*Limit::Create(cal), 0.5);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->burst(), 5);
  EXPECT_EQ(c->calendar(), cal.calendar.get());
}

TEST(FailureModeTest, ParsesNames) {
  FailureMode m;
  ASSERT_TRUE(ParseFailureMode("fail-closed", &m));
  EXPECT_EQ(m, FailureMode::kClosed);
  ASSERT_TRUE(ParseFailureMode("degrade", &m));
  EXPECT_EQ(FailureModeName(m), "degrade");
  EXPECT_FALSE(ParseFailureMode("maybe", &m));
}

}  // namespace
}  // namespace tollgate

namespace tollgate {
namespace {

// A primary whose async answers are held until the test releases them.
class HangingStore final : public Store {
 public:
  ~HangingStore() override { ReleaseAll(); }  // like RedisStore: fails what it still holds
  Result<BatchDecision> Acquire(std::span<const AcquireItem>) override {
    return InternalError("the guard must use AcquireAsync");
  }
  void AcquireAsync(std::span<const AcquireItem> items, Callback done) override {
    if (answer_at_once) {
      BatchDecision d;
      d.allowed = true;
      d.decisions.resize(items.size());
      done(std::move(d));
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(std::move(done));
  }
  bool SupportsLeases() const override { return true; }
  Result<LeaseDecision> AcquireLease(std::string_view, const LeaseLimit&) override {
    return InternalError("the guard must use AcquireLeaseAsync");
  }
  void AcquireLeaseAsync(std::string_view, const LeaseLimit&, LeaseCallback done) override {
    std::lock_guard<std::mutex> lock(mu);
    held_leases.push_back(std::move(done));
  }
  std::string Name() const override { return "hanging"; }
  void ReleaseAll() {
    std::vector<Callback> callbacks;
    std::vector<LeaseCallback> lease_callbacks;
    {
      std::lock_guard<std::mutex> lock(mu);
      callbacks.swap(held);
      lease_callbacks.swap(held_leases);
    }
    for (auto& cb : callbacks) cb(ConnectionError("released late"));
    for (auto& cb : lease_callbacks) cb(ConnectionError("released late"));
  }
  size_t HeldCount() {
    std::lock_guard<std::mutex> lock(mu);
    return held.size() + held_leases.size();
  }

  bool answer_at_once = false;
  std::mutex mu;
  std::vector<Callback> held;              // guarded by mu
  std::vector<LeaseCallback> held_leases;  // guarded by mu
};

TEST(CallDeadlineTest, AHungPrimaryCostsTheDeadlineThenTheBreakerOpens) {
  ManualClock clock;
  ResilientStoreOptions o;
  o.mode = FailureMode::kOpen;
  o.background = false;
  o.clock = &clock;
  o.breaker.clock = &clock;
  o.breaker.consecutive_failures = 3;
  o.call_deadline = std::chrono::milliseconds(20);
  auto hanging = std::make_unique<HangingStore>();
  HangingStore* primary = hanging.get();
  auto store = std::move(*ResilientStore::Create(std::move(hanging), std::move(o)));
  const Limit l = Bucket(5);

  primary->answer_at_once = true;
  auto ok = AcquireOne(*store, "r\x1fk", l, 1);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(store->Stats().primary_decisions, 1u);

  primary->answer_at_once = false;
  for (int i = 0; i < 10; ++i) {
    AcquireItem item{"r\x1fk", &l, 1};
    auto r = store->Acquire({&item, 1});  // would hang forever without the guard
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->enforced);
  }
  EXPECT_EQ(primary->HeldCount(), 3u);  // then the breaker kept calls away
  EXPECT_EQ(store->breaker().state(), BreakerState::kOpen);
  const auto s = store->Stats();
  EXPECT_EQ(s.deadline_expired, 3u);
  EXPECT_EQ(s.short_circuited, 7u);
  primary->ReleaseAll();  // late answers are dropped harmlessly
  EXPECT_EQ(store->Stats().primary_failures, 3u);
}

// call_deadline is timed on io_clock (Clock::WaitUntil): with a ManualClock
// the guard expires when the test moves the clock, never on real time alone.
// One kOpen store over a HangingStore, and one caller thread in Acquire() (or
// AcquireLease()).
struct IoClockGuard {
  explicit IoClockGuard(Nanos deadline, bool lease = false) {
    ResilientStoreOptions o;
    o.mode = FailureMode::kOpen;
    o.background = false;
    o.io_clock = &io;
    o.call_deadline = deadline;
    auto hanging = std::make_unique<HangingStore>();
    primary = hanging.get();
    store = std::move(*ResilientStore::Create(std::move(hanging), std::move(o)));
    caller = std::thread([this, lease] {
      if (lease) {
        auto r = store->AcquireLease("r\x1fk", *LeaseLimit::Create(2, std::chrono::seconds(5)));
        unenforced = r.ok() && r->allowed && !r->enforced;
      } else {
        AcquireItem item{"r\x1fk", &limit, 1};
        auto r = store->Acquire({&item, 1});
        unenforced = r.ok() && !r->enforced;
      }
      returned = true;
    });
  }
  ~IoClockGuard() {  // after a failed assertion: end the call whatever holds it
    if (!caller.joinable()) return;
    io.Advance(std::chrono::hours(2));
    primary->ReleaseAll();
    caller.join();
  }
  ManualClock io;
  const Limit limit = Bucket(5);
  HangingStore* primary = nullptr;
  std::unique_ptr<ResilientStore> store;
  std::atomic<bool> returned{false}, unenforced{false};
  std::thread caller;
};

TEST(CallDeadlineTest, TheDeadlineRunsOnTheInjectedIoClock) {
  IoClockGuard g(std::chrono::hours(1));
  ASSERT_TRUE(testing::WaitFor([&] { return g.primary->HeldCount() == 1; }));
  EXPECT_FALSE(g.returned.load());
  g.io.Advance(std::chrono::hours(1));  // the hour passes on the I/O clock only
  const bool expired = testing::WaitFor([&] { return g.returned.load(); });
  if (!expired) g.primary->ReleaseAll();  // a real-time wait: let the caller go before failing
  g.caller.join();
  ASSERT_TRUE(expired) << "the guard did not expire when its clock passed the deadline";
  EXPECT_TRUE(g.unenforced.load());
  EXPECT_EQ(g.store->Stats().deadline_expired, 1u);
}

TEST(CallDeadlineTest, ALeaseCallsDeadlineRunsOnTheInjectedIoClock) {
  IoClockGuard g(std::chrono::hours(1), /*lease=*/true);
  ASSERT_TRUE(testing::WaitFor([&] { return g.primary->HeldCount() == 1; }));
  EXPECT_FALSE(g.returned.load());
  g.io.Advance(std::chrono::hours(1));
  const bool expired = testing::WaitFor([&] { return g.returned.load(); });
  if (!expired) g.primary->ReleaseAll();
  g.caller.join();
  ASSERT_TRUE(expired) << "the lease call did not expire when its clock passed the deadline";
  EXPECT_TRUE(g.unenforced.load());  // kOpen: admitted without a lease
  EXPECT_EQ(g.store->Stats().deadline_expired, 1u);
}

TEST(CallDeadlineTest, RealTimeAloneDoesNotExpireAnIoClockDeadline) {
  IoClockGuard g(std::chrono::milliseconds(1));
  ASSERT_TRUE(testing::WaitFor([&] { return g.primary->HeldCount() == 1; }));
  // Not synchronisation: real time passes the 1 ms deadline many times over
  // while the I/O clock stands still, and the call must keep waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(g.returned.load()) << "the guard expired on real time";
  g.primary->ReleaseAll();  // the primary's (failed) answer ends the call
  g.caller.join();
  EXPECT_EQ(g.store->Stats().deadline_expired, 0u);
  EXPECT_EQ(g.store->Stats().primary_failures, 1u);
}

// With the background prober and a primary that never answers: the call that
// opens the breaker waits the deadline once (no answer since it was sent opens
// the breaker at once); after that no client call reaches the primary or
// waits, while the prober keeps probing on its own.
TEST(BackgroundProbeTest, ClientsNeverWaitOnAHungPrimaryWhileTheProberProbes) {
  ResilientStoreOptions o;
  o.mode = FailureMode::kOpen;
  o.background = true;
  o.breaker.consecutive_failures = 2;
  o.breaker.open_duration = std::chrono::milliseconds(5);
  // A call that waits on the hung primary lasts the deadline; one that does
  // not takes microseconds. Scaled, so a loaded machine's scheduling delays
  // stay far below it.
  const auto deadline = testing::Scaled(std::chrono::milliseconds(100));
  o.call_deadline = deadline;
  auto hanging = std::make_unique<HangingStore>();
  HangingStore* primary = hanging.get();
  auto store = std::move(*ResilientStore::Create(std::move(hanging), std::move(o)));
  const Limit l = Bucket(5);
  ASSERT_TRUE(AcquireOne(*store, "r\x1fk", l, 1).ok());
  ASSERT_NE(store->breaker().state(), BreakerState::kClosed);
  EXPECT_EQ(store->Stats().breaker.opened_by_no_answer, 1u);
  // Each held call is the client call or a probe; wait for three probes.
  const auto until = std::chrono::steady_clock::now() + testing::Scaled(std::chrono::seconds(10));
  uint64_t client_calls = 0;
  while (store->Stats().breaker.probes < 3 && std::chrono::steady_clock::now() < until) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = AcquireOne(*store, "r\x1fk", l, 1);
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(r.ok());
    EXPECT_LT(took, deadline) << "a client call waited on the primary";
    ++client_calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // paces the caller
  }
  const auto s = store->Stats();
  ASSERT_GE(s.breaker.probes, 3u);
  // Clients never reached the primary: it holds the first client call and the
  // probes (one may be counted but not handed over yet, or start meanwhile).
  const size_t held = primary->HeldCount();
  EXPECT_GE(held, 1 + s.breaker.probes - 1);
  EXPECT_LE(held, 1 + store->Stats().breaker.probes);
  EXPECT_EQ(s.short_circuited, client_calls);
  EXPECT_GE(s.deadline_expired, 1 + s.breaker.probes - 1);  // probes meet the deadline too
  store.reset();  // joins the prober; the primary fails what it still holds
}

// The prober closes the breaker when the primary is back, with no client call.
TEST(BackgroundProbeTest, TheProberClosesTheBreakerWithoutClientCalls) {
  ResilientStoreOptions o;
  o.mode = FailureMode::kClosed;
  o.background = true;
  o.breaker.consecutive_failures = 2;
  o.breaker.open_duration = std::chrono::milliseconds(5);
  auto fake = std::make_unique<FakeStore>(&SystemClock::Instance());
  FakeStore* primary = fake.get();
  auto store = std::move(*ResilientStore::Create(std::move(fake), std::move(o)));
  const Limit l = Bucket(5);
  primary->fail = StatusCode::kConnection;
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(AcquireOne(*store, "r\x1fk", l, 1).ok());
  ASSERT_TRUE(testing::WaitFor([&] { return store->Stats().breaker.probes >= 2; },
                               std::chrono::seconds(10)));
  EXPECT_NE(store->breaker().state(), BreakerState::kClosed);
  primary->fail = StatusCode::kOk;
  ASSERT_TRUE(testing::WaitFor([&] { return store->breaker().state() == BreakerState::kClosed; },
                               std::chrono::seconds(10)));
  auto r = AcquireOne(*store, "r\x1fk", l, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(store->Stats().primary_decisions, 1u);
  EXPECT_EQ(r->remaining, 4);  // decided by the primary: the probes charged nothing
}

TEST(ShutdownTest, AsyncCallsHeldByThePrimaryCompleteOnDestruction) {
  ResilientStoreOptions o;
  o.mode = FailureMode::kClosed;
  o.background = false;
  auto hanging = std::make_unique<HangingStore>();
  HangingStore* primary = hanging.get();
  auto store = std::move(*ResilientStore::Create(std::move(hanging), std::move(o)));
  const Limit l = Bucket(5);
  std::vector<StatusCode> codes;
  for (int i = 0; i < 3; ++i) {
    AcquireItem item{"r\x1fk", &l, 1};
    store->AcquireAsync({&item, 1},
                        [&codes](Result<BatchDecision> r) { codes.push_back(r.status().code()); });
  }
  EXPECT_EQ(primary->HeldCount(), 3u);
  store.reset();
  ASSERT_EQ(codes.size(), 3u);
  for (StatusCode c : codes) EXPECT_EQ(c, StatusCode::kUnavailable);  // answered per the mode
}

}  // namespace
}  // namespace tollgate
