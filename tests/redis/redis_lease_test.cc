// Concurrency leases on a real redis-server: exact across several stores (as
// several services would be), expiry on the client clock to the microsecond,
// a holder that goes away without releasing, and hostile replies.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "lease_cases.h"
#include "lease_prediction.h"
#include "redis/lease_script.h"
#include "testing/redis_server.h"
#include "testing/timing.h"
#include "tollgate/redis_store.h"

namespace tollgate {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

std::unique_ptr<RedisStore> MakeStore(const testing::RedisServer& server,
                                      const Clock* client_clock = nullptr) {
  RedisOptions o;
  o.port = server.port();
  o.call_timeout = testing::Scaled(std::chrono::milliseconds(5000));
  if (client_clock != nullptr) {
    o.use_client_clock = true;
    o.clock = client_clock;
  }
  auto s = RedisStore::Create(o);
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(RedisLeaseTest, SimultaneousAcquiresFromSeveralStoresGrantExactlyMaxInFlight) {
  TOLLGATE_START_REDIS(server);
  auto a = MakeStore(server), b = MakeStore(server), c = MakeStore(server);
  ASSERT_TRUE(a && b && c);
  testing::ExpectSimultaneousAcquiresGrantExactly(
      {a.get(), b.get(), c.get()}, "tenant", *LeaseLimit::Create(7, Nanos(60 * kSecond)), 4, 10);
}

TEST(RedisLeaseTest, NeverMoreThanMaxInFlightWhileHoldersComeAndGo) {
  TOLLGATE_START_REDIS(server);
  auto a = MakeStore(server), b = MakeStore(server);
  ASSERT_TRUE(a && b);
  testing::ExpectNeverMoreThanMaxInFlight({a.get(), b.get()}, "tenant",
                                          *LeaseLimit::Create(3, Nanos(60 * kSecond)), 4, 150);
}

TEST(RedisLeaseTest, AsyncCallsInFlightAtOnceGrantExactlyMaxInFlight) {
  TOLLGATE_START_REDIS(server);
  auto a = MakeStore(server), b = MakeStore(server), c = MakeStore(server);
  ASSERT_TRUE(a && b && c);
  testing::ExpectAsyncAcquiresGrantExactly({a.get(), b.get(), c.get()}, "tenant",
                                           *LeaseLimit::Create(5, Nanos(60 * kSecond)), 20);
}

TEST(RedisLeaseTest, LeakedLeasesComeBackAtTheirExpiryOnTheClientClock) {
  TOLLGATE_START_REDIS(server);
  ManualClock clock;
  auto store = MakeStore(server, &clock);
  ASSERT_NE(store, nullptr);
  const LeaseLimit limit = *LeaseLimit::Create(2, Nanos(30 * kSecond));
  auto first = store->AcquireLease("k", limit);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(first->allowed);
  EXPECT_EQ(first->lease_id.size(), 32u);
  EXPECT_EQ(first->remaining, 1);
  clock.Advance(Nanos(10 * kSecond));
  auto second = store->AcquireLease("k", limit);
  ASSERT_TRUE(second->allowed);
  EXPECT_EQ(second->remaining, 0);
  auto denied = store->AcquireLease("k", limit);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(denied->retry_after, Nanos(20 * kSecond));
  clock.Advance(Nanos(20 * kSecond - 1000));  // one microsecond before the first expiry
  EXPECT_FALSE(store->AcquireLease("k", limit)->allowed);
  clock.Advance(Nanos(1000));
  EXPECT_TRUE(store->AcquireLease("k", limit)->allowed);
  EXPECT_FALSE(store->AcquireLease("k", limit)->allowed);
  // The late release of the expired lease frees nothing.
  EXPECT_FALSE(*store->ReleaseLease("k", first->lease_id));
  EXPECT_FALSE(store->AcquireLease("k", limit)->allowed);
  // The set expires with its last lease (server time: at most the lease time).
  const std::string ttl = server.Command({"PTTL", store->RedisKeyFor("k") + "|cc"});
  EXPECT_GT(std::stoll(ttl), 0);
  EXPECT_LE(std::stoll(ttl), 30'001);
}

// A holder that goes away without releasing (its store destroyed, its
// connections closed): its slots come back once its leases expire, on the
// server's clock.
TEST(RedisLeaseTest, SlotsOfAHolderThatDiedComeBackWithinTheLeaseTime) {
  TOLLGATE_START_REDIS(server);
  const LeaseLimit limit = *LeaseLimit::Create(3, Nanos(300'000'000));  // 300 ms
  {
    auto holder = MakeStore(server);
    ASSERT_NE(holder, nullptr);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(holder->AcquireLease("k", limit)->allowed);
  }
  auto other = MakeStore(server);
  ASSERT_NE(other, nullptr);
  auto denied = other->AcquireLease("k", limit);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_GT(denied->retry_after.count(), 0);
  EXPECT_LE(denied->retry_after.count(), limit.lease_ns());
  int admitted = 0;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto d = other->AcquireLease("k", limit);
        admitted += d.ok() && d->allowed;
        return admitted == 3;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(20)))
      << "admitted " << admitted;
  EXPECT_FALSE(other->AcquireLease("k", limit)->allowed);
}

TEST(RedisLeaseTest, ReleaseChecksTheIdAndIsIdempotent) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const LeaseLimit limit = *LeaseLimit::Create(1, Nanos(60 * kSecond));
  auto d = store->AcquireLease("k", limit);
  ASSERT_TRUE(d->allowed);
  EXPECT_FALSE(*store->ReleaseLease("other", d->lease_id)) << "bound to its key";
  EXPECT_TRUE(*store->ReleaseLease("k", d->lease_id));
  EXPECT_FALSE(*store->ReleaseLease("k", d->lease_id));
  for (std::string_view bad : {"", "XYZ", "0123456789abcdef0123456789abcdef0", "a b"}) {
    auto r = store->ReleaseLease("k", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(store->AcquireLease("k", limit)->allowed);
}

TEST(RedisLeaseScriptTest, HostileRepliesAreRefused) {
  const LeaseLimit limit = *LeaseLimit::Create(2, Nanos(kSecond));
  auto integer = [](int64_t v) {
    RedisReply r;
    r.type = RedisReply::Type::kInteger;
    r.integer = v;
    return r;
  };
  auto array = [](std::vector<RedisReply> e) {
    RedisReply r;
    r.type = RedisReply::Type::kArray;
    r.elements = std::move(e);
    return r;
  };
  RedisReply error;
  error.type = RedisReply::Type::kError;
  error.str = std::string(1000, 'E');
  auto e = redis::ParseAcquireLeaseReply(error, limit, "ab");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kServer);
  EXPECT_LE(e.status().message().size(), 200u);
  for (const RedisReply& bad :
       {integer(1), array({integer(1), integer(1)}), array({integer(2), integer(1), integer(0)}),
        array({integer(0), integer(-1), integer(0)}), array({integer(0), integer(1), integer(-5)}),
        array({integer(1), RedisReply{}, integer(0)})}) {
    auto r = redis::ParseAcquireLeaseReply(bad, limit, "ab");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kScript);
  }
  auto huge = redis::ParseAcquireLeaseReply(
      array({integer(0), integer(2), integer(int64_t{1} << 60)}), limit, "ab");
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->retry_after.count(), LeaseLimit::kMaxLeaseNs) << "clamped, never overflows";
  EXPECT_EQ(huge->remaining, 0);
}

// Issue 29: 1,000 own leases tell nothing about the next id (the store drew
// them from std::mt19937_64, whose state 156 ids give away), and releasing
// every id derived from them frees no one else's lease.
TEST(RedisLeaseTest, IdsAreUnpredictableFromAThousandOwnLeases) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  testing::ExpectForgedReleasesFreeNothing(*store, "tenant", 1000);
}

}  // namespace
}  // namespace tollgate
