// LocalStore's concurrency leases: exact under contention, leaked leases come
// back at their expiry (driven by a ManualClock), bounded key count.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "lease_cases.h"
#include "lease_prediction.h"
#include "tollgate/local_store.h"

namespace tollgate {
namespace {

constexpr int kThreads = 8;
constexpr int64_t kSecond = 1'000'000'000;

std::unique_ptr<LocalStore> MakeStore(const Clock* clock, size_t max_keys = 1024,
                                      size_t shards = 4) {
  LocalStoreOptions o;
  o.clock = clock;
  o.max_keys = max_keys;
  o.shards = shards;
  return std::move(*LocalStore::Create(o));
}

TEST(LeaseLimitTest, ValidatesAndNamesTheField) {
  EXPECT_TRUE(LeaseLimit::Create(1, Nanos(kSecond)).ok());
  auto zero = LeaseLimit::Create(0, Nanos(kSecond));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("max_in_flight"), std::string::npos);
  EXPECT_FALSE(LeaseLimit::Create(LeaseLimit::kMaxInFlight + 1, Nanos(kSecond)).ok());
  auto short_lease = LeaseLimit::Create(5, Nanos(999'999));
  ASSERT_FALSE(short_lease.ok());
  EXPECT_NE(short_lease.status().message().find("lease_time"), std::string::npos);
  EXPECT_FALSE(LeaseLimit::Create(5, Nanos(LeaseLimit::kMaxLeaseNs + 1)).ok());
  EXPECT_EQ(LeaseLimit::Create(20, Nanos(30 * kSecond))->ToString(),
            "concurrency max_in_flight=20 lease=30s");
}

TEST(LocalLeaseTest, SimultaneousAcquiresGrantExactlyMaxInFlight) {
  ManualClock clock;
  auto store = MakeStore(&clock);
  testing::ExpectSimultaneousAcquiresGrantExactly(
      {store.get()}, "tenant", *LeaseLimit::Create(5, Nanos(60 * kSecond)), kThreads, 100);
}

TEST(LocalLeaseTest, NeverMoreThanMaxInFlightWhileHoldersComeAndGo) {
  ManualClock clock;
  auto store = MakeStore(&clock);
  testing::ExpectNeverMoreThanMaxInFlight(
      {store.get()}, "tenant", *LeaseLimit::Create(3, Nanos(60 * kSecond)), kThreads, 2000);
  EXPECT_EQ(store->Stats().lease_keys, 1u);
}

TEST(LocalLeaseTest, AsyncCallsGrantExactlyMaxInFlight) {
  ManualClock clock;
  auto store = MakeStore(&clock);
  testing::ExpectAsyncAcquiresGrantExactly({store.get()}, "tenant",
                                           *LeaseLimit::Create(4, Nanos(60 * kSecond)), 30);
}

TEST(LocalLeaseTest, LeakedLeasesComeBackAtTheirExpiry) {
  ManualClock clock;
  auto store = MakeStore(&clock);
  const LeaseLimit limit = *LeaseLimit::Create(2, Nanos(30 * kSecond));
  // A holder takes both slots and dies without releasing.
  auto first = store->AcquireLease("k", limit);
  clock.Advance(Nanos(10 * kSecond));
  auto second = store->AcquireLease("k", limit);
  ASSERT_TRUE(first->allowed && second->allowed);
  EXPECT_EQ(second->remaining, 0);
  EXPECT_EQ(second->expires_in, Nanos(30 * kSecond));
  auto denied = store->AcquireLease("k", limit);
  EXPECT_FALSE(denied->allowed);
  EXPECT_TRUE(denied->lease_id.empty());
  EXPECT_EQ(denied->retry_after, Nanos(20 * kSecond)) << "until the first lease expires";
  clock.Advance(Nanos(20 * kSecond - 1));
  EXPECT_FALSE(store->AcquireLease("k", limit)->allowed);
  clock.Advance(Nanos(1));  // the first lease's expiry: its slot is back
  auto back = store->AcquireLease("k", limit);
  EXPECT_TRUE(back->allowed);
  EXPECT_FALSE(store->AcquireLease("k", limit)->allowed);
  // A late release of the expired lease frees nothing.
  EXPECT_FALSE(*store->ReleaseLease("k", first->lease_id));
  EXPECT_FALSE(store->AcquireLease("k", limit)->allowed);
}

TEST(LocalLeaseTest, ReleaseIsIdempotentAndChecksTheId) {
  ManualClock clock;
  auto store = MakeStore(&clock);
  const LeaseLimit limit = *LeaseLimit::Create(1, Nanos(kSecond));
  auto d = store->AcquireLease("k", limit);
  ASSERT_TRUE(d->allowed);
  EXPECT_TRUE(ValidLeaseId(d->lease_id));
  EXPECT_FALSE(*store->ReleaseLease("other", d->lease_id)) << "bound to its key";
  EXPECT_TRUE(*store->ReleaseLease("k", d->lease_id));
  EXPECT_FALSE(*store->ReleaseLease("k", d->lease_id));
  for (std::string_view bad : {"", "XYZ", "0123456789abcdef0", "12 4"}) {
    auto r = store->ReleaseLease("k", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  // A lease released after its expiry reports that it no longer counted.
  auto late = store->AcquireLease("k", limit);
  clock.Advance(Nanos(kSecond));
  EXPECT_FALSE(*store->ReleaseLease("k", late->lease_id));
  // Ids are unique across many grants.
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    auto g = store->AcquireLease("k", limit);
    ASSERT_TRUE(g->allowed);
    EXPECT_TRUE(ids.insert(g->lease_id).second);
    ASSERT_TRUE(*store->ReleaseLease("k", g->lease_id));
  }
}

TEST(LocalLeaseTest, KeyCountIsBoundedAndSweptKeysMakeRoom) {
  ManualClock clock;
  // One shard, so the sweep of the new key's shard sees every key.
  auto store = MakeStore(&clock, /*max_keys=*/2, /*shards=*/1);
  const LeaseLimit limit = *LeaseLimit::Create(1, Nanos(kSecond));
  EXPECT_TRUE(store->AcquireLease("a", limit)->allowed);
  EXPECT_TRUE(store->AcquireLease("b", limit)->allowed);
  auto full = store->AcquireLease("c", limit);
  EXPECT_FALSE(full->allowed) << "a full table never admits unlimited";
  EXPECT_EQ(full->retry_after, Nanos(kSecond));
  EXPECT_EQ(store->Stats().lease_overflow_rejected, 1u);
  clock.Advance(Nanos(kSecond));  // "a" and "b" expired: the sweep makes room
  EXPECT_TRUE(store->AcquireLease("c", limit)->allowed);
  EXPECT_EQ(store->Stats().lease_keys, 1u);
}

TEST(LocalLeaseTest, ClearForgetsLeases) {
  ManualClock clock;
  auto store = MakeStore(&clock);
  const LeaseLimit limit = *LeaseLimit::Create(1, Nanos(kSecond));
  EXPECT_TRUE(store->AcquireLease("k", limit)->allowed);
  store->Clear();
  EXPECT_EQ(store->Stats().lease_keys, 0u);
  EXPECT_TRUE(store->AcquireLease("k", limit)->allowed);
}

// The predictors of lease_prediction.h break the schemes the stores used
// before issue 29, so that their finding nothing in the stores' ids means
// something: splitmix64 of counter ^ secret (LocalStore), and two
// std::mt19937_64 outputs per id (the Redis stores).
TEST(LeaseIdPredictorTest, BreaksTheOldIdSchemes) {
  const uint64_t secret = 0x5eed5eed12345678ULL;
  std::vector<std::string> counter_ids;
  for (uint64_t counter = 1000; counter < 2001; ++counter) {
    counter_ids.push_back(testing::Hex64(testing::SplitmixFinalize(counter ^ secret)));
  }
  EXPECT_EQ(testing::PredictEach(counter_ids).splitmix, 1000);
  std::seed_seq seed{1, 2, 3, 4, 5, 6, 7, 8};
  std::mt19937_64 rng(seed);
  rng.discard(77);  // not at a block boundary
  std::vector<std::string> mt_ids;
  for (int i = 0; i < 1001; ++i) {
    const uint64_t hi = rng(), lo = rng();
    mt_ids.push_back(testing::Hex64(hi) + testing::Hex64(lo));
  }
  EXPECT_EQ(testing::PredictEach(mt_ids).mersenne, 1001 - 156);
  // And the attack finds the next id among what it forges.
  std::vector<std::string> own(mt_ids.begin(), mt_ids.end() - 1);
  const auto forged = testing::ForgedIds(own);
  EXPECT_NE(std::find(forged.begin(), forged.end(), mt_ids.back()), forged.end());
  std::vector<std::string> own_counter(counter_ids.begin(), counter_ids.end() - 1);
  const auto forged_counter = testing::ForgedIds(own_counter);
  EXPECT_NE(std::find(forged_counter.begin(), forged_counter.end(), counter_ids.back()),
            forged_counter.end());
}

// Issue 29: 1,000 own leases tell nothing about the next id, and releasing
// every id derived from them frees no one else's lease.
TEST(LocalLeaseTest, IdsAreUnpredictableFromAThousandOwnLeases) {
  ManualClock clock;
  auto store = MakeStore(&clock);
  testing::ExpectForgedReleasesFreeNothing(*store, "tenant", 1000);
}

}  // namespace
}  // namespace tollgate
