// RedisStore against a real redis-server: the store contract, exact agreement
// with core's Step(), scripts, TTLs, key layout, timeouts and reconnects.
#include "tollgate/redis_store.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "period_cases.h"
#include "redis/redis_keys.h"
#include "redis/window_agreement.h"
#include "settle_contract.h"
#include "testing/redis_server.h"
#include "testing/timing.h"
#include "tollgate/algorithm.h"
#include "tollgate/local_store.h"
#include "tollgate/time_zone.h"

namespace tollgate::testing {

// One server for the contract suite (and its helpers); each test gets a fresh store.
RedisServer* SharedRedis() {
  static auto start = RedisServer::Start();
  return start.server.get();
}

// A store on `server`; its timeouts (timeouts its calls are expected to meet,
// or to hit only when the test makes Redis fail) scaled for a loaded machine.
std::unique_ptr<RedisStore> MakeRedisStore(const RedisServer& server, RedisOptions o = {}) {
  o.host = "127.0.0.1";
  o.port = server.port();
  o.call_timeout = Scaled(o.call_timeout);
  o.connect_timeout = Scaled(o.connect_timeout);
  auto s = RedisStore::Create(o);
  return s.ok() ? std::move(*s) : nullptr;
}

std::unique_ptr<Store> MakeSharedRedisStore() {
  RedisServer* server = SharedRedis();
  if (server == nullptr) return nullptr;
  return MakeRedisStore(*server);
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreContractTest,
                         ::testing::Values(StoreFactory(MakeSharedRedisStore)));
INSTANTIATE_TEST_SUITE_P(Redis, SettleContractTest,
                         ::testing::Values(StoreFactory(MakeSharedRedisStore)));

}  // namespace tollgate::testing

namespace tollgate {
namespace {

using testing::RedisServer;
using namespace std::chrono_literals;

std::unique_ptr<RedisStore> MakeStore(const RedisServer& server, RedisOptions o = {}) {
  return testing::MakeRedisStore(server, std::move(o));
}

Limit Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

using testing::Scaled;
using testing::WaitFor;

using testing::ReferenceBatch;

TEST(RedisStore, ScriptAgreesWithCoreStepDecisionForDecision) {
  TOLLGATE_START_REDIS(server);
  ManualClock clock(5'000'000'000LL, 1'763'700'000'000'000'000LL);
  RedisOptions o;
  o.use_client_clock = true;
  o.clock = &clock;
  auto store = MakeStore(server, o);
  ASSERT_NE(store, nullptr);

  std::vector<Limit> limits = {Bucket(10, 10),  Bucket(0.3, 3),           Bucket(1e9, 1000),
                               Bucket(1e-6, 1), Bucket(0.001, 1'000'000), Bucket(123.456, 17)};
  LimitSpec shaper;
  shaper.algorithm = Algorithm::kLeakyBucket;
  shaper.rate = 5;
  shaper.burst = 6;
  shaper.max_delay = 700ms;
  limits.push_back(*Limit::Create(shaper));
  shaper.max_delay = Nanos(0);
  limits.push_back(*Limit::Create(shaper));

  std::mt19937_64 rng(20261121);
  std::map<std::string, uint64_t> state;
  const std::vector<std::string> keys = {"k0", "k1", "k2", "k3"};
  int compared = 0, allowed = 0;
  for (int round = 0; round < 1500; ++round) {
    // Mostly forward, sometimes far, sometimes backwards.
    const int pick = static_cast<int>(rng() % 10);
    if (pick < 6) {
      clock.Advance(Nanos(static_cast<int64_t>(rng() % 200'000'000)));
    } else if (pick < 8) {
      clock.Advance(Nanos(static_cast<int64_t>(rng() % 5'000'000'000LL)));
    } else if (pick == 8) {
      clock.Set(clock.Now() - static_cast<int64_t>(rng() % 300'000'000));
    }
    const size_t n = 1 + rng() % 3;
    std::vector<std::string> names;  // owns the keys the items point at
    names.reserve(n);
    std::vector<AcquireItem> items;
    for (size_t i = 0; i < n; ++i) {
      // A key keeps one limit (a real rule does), so states stay comparable.
      const size_t k = rng() % keys.size();
      const size_t li = (k + static_cast<size_t>(round) / 300) % limits.size();
      const Limit* l = &limits[li];
      int64_t cost = static_cast<int64_t>(rng() % 4);
      if (rng() % 20 == 0) cost = l->burst() + 1;
      names.push_back(keys[k] + "@" + std::to_string(li));
      items.push_back({names.back(), l, cost});
    }

    const int64_t now = clock.WallNow();
    BatchDecision want = ReferenceBatch(state, items, now);
    auto got = store->Acquire(items);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->allowed, want.allowed) << "round " << round;
    ASSERT_EQ(got->denied_index, want.denied_index) << "round " << round;
    ASSERT_EQ(got->decisions.size(), want.decisions.size());
    for (size_t i = 0; i < n; ++i) {
      const Decision& g = got->decisions[i];
      const Decision& w = want.decisions[i];
      ASSERT_EQ(g, w) << "round " << round << " item " << i << " cost " << items[i].cost
                      << " limit " << items[i].limit->ToString() << "\n got allowed=" << g.allowed
                      << " remaining=" << g.remaining << " retry=" << g.retry_after.count()
                      << " reset=" << g.reset_after.count() << " delay=" << g.delay.count()
                      << "\nwant allowed=" << w.allowed << " remaining=" << w.remaining
                      << " retry=" << w.retry_after.count() << " reset=" << w.reset_after.count()
                      << " delay=" << w.delay.count();
      ++compared;
      allowed += g.allowed ? 1 : 0;
    }
  }
  EXPECT_GT(compared, 2000);
  EXPECT_GT(allowed, 300);  // the sequence exercised both outcomes
  EXPECT_LT(allowed, compared - 300);
}

struct WindowPair {
  std::unique_ptr<RedisStore> redis;
  std::unique_ptr<LocalStore> local;
};

// A Redis store on the client clock and a LocalStore whose windows align with it.
WindowPair MakeWindowPair(const RedisServer& server, ManualClock& clock) {
  WindowPair p;
  RedisOptions o;
  o.use_client_clock = true;
  o.clock = &clock;
  p.redis = MakeStore(server, o);
  LocalStoreOptions lo;
  lo.clock = &clock;  // created at kStartNs: local time == clock.Now()
  auto local = LocalStore::Create(lo);
  if (local.ok()) p.local = std::move(*local);
  return p;
}

TEST(RedisStore, WindowsAgreeWithLocalStoreDecisionForDecision) {
  TOLLGATE_START_REDIS(server);
  for (uint64_t seed : {20260101u, 7u}) {
    ManualClock clock(testing::kStartNs, testing::kWallOffsetNs);
    WindowPair p = MakeWindowPair(server, clock);
    ASSERT_NE(p.redis, nullptr);
    ASSERT_NE(p.local, nullptr);
    ASSERT_EQ(server.Command({"FLUSHALL"}), "OK");
    testing::ExpectWindowsAgreeWithLocal(*p.redis, *p.local, clock, seed, 2500,
                                         /*backwards=*/seed == 7u);
  }
}

// Issue 17's counts per period through the script, to the nanosecond, on the
// client clock (tests/period_cases.h); the same numbers as core and LocalStore.
TEST(RedisStore, CountsPerPeriodAreExactToTheNanosecond) {
  TOLLGATE_START_REDIS(server);
  ManualClock clock(testing::kStartNs, testing::kWallOffsetNs);
  WindowPair p = MakeWindowPair(server, clock);
  ASSERT_NE(p.redis, nullptr);
  testing::ExpectPeriodsExactOnStore(*p.redis, clock, "period:");
  testing::ExpectQuotasExactOnStore(*p.redis, clock, "quota:");
  testing::ExpectCalendarQuotasOnStore(*p.redis, clock, "calendar:");
}

// A calendar quota on Redis TIME (the default): the script picks the window
// from the boundaries a client sends, so instances whose own clocks disagree
// by hours still count in one window under one key, and the reset is the real
// time to the local midnight. A client a few days off gets an error, never a
// wrong window.
TEST(RedisStore, CalendarQuotaOnServerTimeIsOneWindowForEveryInstance) {
  TOLLGATE_START_REDIS(server);
  const int64_t hour = 3600LL * 1'000'000'000;
  const int64_t real = SystemClock::Instance().WallNow();
  ManualClock ahead(0, real + 6 * hour);  // an instance whose clock runs 6 h fast
  ManualClock far(0, real + 72 * hour);
  RedisOptions fast_options, far_options;
  fast_options.clock = &ahead;
  far_options.clock = &far;
  auto a = MakeStore(server), b = MakeStore(server, fast_options),
       c = MakeStore(server, far_options);
  ASSERT_TRUE(a && b && c);
  LimitSpec spec;
  spec.algorithm = Algorithm::kFixedWindow;
  spec.burst = 3;
  auto zone = TimeZone::Load("Europe/Berlin");
  ASSERT_TRUE(zone.ok()) << zone.status().ToString();
  spec.calendar = std::make_shared<Calendar>(CalendarUnit::kDay, *zone);
  auto limit = Limit::Create(spec);
  ASSERT_TRUE(limit.ok());
  const int64_t before = SystemClock::Instance().WallNow();
  auto first = AcquireOne(*a, "fleet", *limit, 2);
  auto second = AcquireOne(*b, "fleet", *limit, 1);
  auto third = AcquireOne(*a, "fleet", *limit, 1);
  const int64_t after = SystemClock::Instance().WallNow();
  ASSERT_TRUE(first.ok() && second.ok() && third.ok()) << second.status().ToString();
  const Calendar::Window w = spec.calendar->At(before);
  if (spec.calendar->At(after).index != w.index) GTEST_SKIP() << "ran across a local midnight";
  EXPECT_TRUE(first->allowed);
  EXPECT_TRUE(second->allowed);
  EXPECT_EQ(second->remaining, 0);
  EXPECT_FALSE(third->allowed);
  // Redis read TIME between `before` and `after` (in whole µs: 1 µs slack).
  EXPECT_LE(third->retry_after.count(), w.end_ns - before + 1000);
  EXPECT_GE(third->retry_after.count(), w.end_ns - after);
  auto off = AcquireOne(*c, "fleet", *limit, 1);
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.status().message().find("calendar window out of range"), std::string::npos)
      << off.status().ToString();
}

// A window longer than 2^53 ns (Lua's exact integers) across its boundaries:
// the script never holds a time in one double.
TEST(RedisStore, WindowsLongerThan2To53NsAreExactAtBoundaries) {
  TOLLGATE_START_REDIS(server);
  ManualClock clock(testing::kStartNs, testing::kWallOffsetNs);
  WindowPair p = MakeWindowPair(server, clock);
  ASSERT_NE(p.redis, nullptr);
  ASSERT_NE(p.local, nullptr);
  constexpr int64_t w = 10'000'000'000'000'000LL;  // 1e16 ns, divides the wall offset
  static_assert(w > (int64_t{1} << 53));
  const Limit fixed = testing::WindowLimit(Algorithm::kFixedWindow, 5, w);
  const Limit sliding = testing::WindowLimit(Algorithm::kSlidingWindow, 5, w);
  const Limit bucket = Bucket(0.001, 3);
  struct Step {
    int64_t at;
    int64_t fixed_cost, sliding_cost;
  };
  const std::vector<Step> steps = {{testing::kStartNs, 2, 2},
                                   {w - 2, 3, 2},
                                   {w - 1, 1, 2},
                                   {w, 2, 1},
                                   {w + 1, 4, 3},
                                   {w + w / 2, 0, 1},
                                   {w + w / 2 + 1, 1, 2},
                                   {2 * w - 1, 6, 2},
                                   {2 * w, 5, 5},
                                   {2 * w - 7, 1, 1},
                                   {2 * w + 3, 1, 1},
                                   {3 * w + w / 3, 2, 4},
                                   {5 * w + 17, 5, 5},
                                   {5 * w + w - 1, 1, 1},
                                   {6 * w, 0, 0}};
  std::map<std::string, uint64_t> model;
  LocalStore* local = p.local.get();  // compared until the clock steps back
  int n = 0;
  for (const Step& s : steps) {
    if (s.at < clock.Now()) local = nullptr;
    clock.Set(s.at);
    const std::vector<AcquireItem> one_fixed = {{"f", &fixed, s.fixed_cost}};
    const std::vector<AcquireItem> one_sliding = {{"s", &sliding, s.sliding_cost}};
    const std::vector<AcquireItem> mixed = {
        {"b", &bucket, 1}, {"f", &fixed, 1}, {"s", &sliding, s.sliding_cost}};
    const int64_t now = clock.Now();
    const std::string at = " step " + std::to_string(n);
    testing::CompareBatch(*p.redis, local, model, now, one_fixed, "fixed" + at);
    testing::CompareBatch(*p.redis, local, model, now, one_sliding, "sliding" + at);
    testing::CompareBatch(*p.redis, local, model, now, mixed, "mixed" + at);
    ++n;
  }
}

TEST(RedisStore, WindowStateIsOneShortStringKeyedByWindowWithWindowTtl) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const Limit fixed = testing::WindowLimit(Algorithm::kFixedWindow, 5, 1'000'000'000'000LL);
  const Limit fixed_other = testing::WindowLimit(Algorithm::kFixedWindow, 5, 2'000'000'000'000LL);
  const Limit sliding = testing::WindowLimit(Algorithm::kSlidingWindow, 5, 1'000'000'000'000LL);
  const Limit bucket = Bucket(0.001, 5);
  // One item key under four limits: four states that never read each other.
  ASSERT_TRUE(AcquireOne(*store, "w", fixed, 2).value().allowed);
  ASSERT_TRUE(AcquireOne(*store, "w", fixed_other, 3).value().allowed);
  ASSERT_TRUE(AcquireOne(*store, "w", sliding, 4).value().allowed);
  ASSERT_TRUE(AcquireOne(*store, "w", bucket, 1).value().allowed);
  EXPECT_EQ(AcquireOne(*store, "w", fixed, 0).value().remaining, 3);
  EXPECT_EQ(AcquireOne(*store, "w", fixed_other, 0).value().remaining, 2);
  EXPECT_EQ(AcquireOne(*store, "w", sliding, 0).value().remaining, 1);
  EXPECT_EQ(AcquireOne(*store, "w", bucket, 0).value().remaining, 4);

  const std::string fkey = "tg:w|fw:1000000000000", skey = "tg:w|sw:1000000000000";
  const std::string fval = server.Command({"GET", fkey});
  const std::string sval = server.Command({"GET", skey});
  ASSERT_FALSE(fval.empty());
  ASSERT_FALSE(sval.empty());
  EXPECT_EQ(fval.find_first_not_of("0123456789"), std::string::npos) << fval;
  EXPECT_EQ(sval.find_first_not_of("0123456789"), std::string::npos) << sval;
  // Window index (now / 1000 s), then used: 7 digits; sliding: prev, curr.
  const int64_t idx = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count() /
                      1000;
  EXPECT_LE(std::abs(std::stoll(fval.substr(0, fval.size() - 7)) - idx), 1) << fval;
  EXPECT_EQ(fval.substr(fval.size() - 7), "0000002");
  EXPECT_EQ(sval.substr(sval.size() - 14), "00000000000004");
  EXPECT_EQ(server.Command({"OBJECT", "ENCODING", fkey}), "int");
  // Fixed: until the window ends (<= 1000 s); sliding: its counts weigh on
  // the next window too (<= 2000 s, > 1000 s).
  const int64_t fttl = std::stoll(server.Command({"PTTL", fkey}));
  const int64_t sttl = std::stoll(server.Command({"PTTL", skey}));
  EXPECT_GT(fttl, 0);
  EXPECT_LE(fttl, 1'000'000);
  EXPECT_GT(sttl, 1'000'000);
  EXPECT_LE(sttl, 2'000'000);
  // A denied decision and a peek write nothing.
  ASSERT_FALSE(AcquireOne(*store, "w", fixed, 4).value().allowed);
  EXPECT_EQ(server.Command({"GET", fkey}), fval);
}

TEST(RedisStore, StoredValueIsOneIntegerStringWithRefillTtl) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const Limit l = Bucket(0.001, 5);  // one token per 1000 s
  ASSERT_TRUE(AcquireOne(*store, "ttl", l, 2).value().allowed);
  const std::string key = store->RedisKeyFor("ttl");
  EXPECT_EQ(key, "tg:ttl");
  const std::string value = server.Command({"GET", key});
  ASSERT_FALSE(value.empty());
  EXPECT_EQ(value.find_first_not_of("0123456789"), std::string::npos) << value;
  EXPECT_EQ(server.Command({"OBJECT", "ENCODING", key}), "int");
  const int64_t pttl = std::stoll(server.Command({"PTTL", key}));
  EXPECT_LE(pttl, 2'000'000);  // two tokens take 2000 s to refill
  EXPECT_GT(pttl, 1'990'000);
}

TEST(RedisStore, IdleKeysExpireWhenTheBucketIsFull) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const Limit fast = Bucket(100, 2);  // full again 10-20 ms after use
  ASSERT_TRUE(AcquireOne(*store, "short", fast, 2).value().allowed);
  const std::string key = store->RedisKeyFor("short");
  EXPECT_TRUE(WaitFor([&] { return server.Command({"EXISTS", key}) == "0"; }));
}

TEST(RedisStore, RecoversFromScriptFlushWithoutDoubleCharging) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const Limit l = Bucket(0.001, 10);
  ASSERT_TRUE(AcquireOne(*store, "ns", l, 2).value().allowed);
  ASSERT_EQ(server.Command({"SCRIPT", "FLUSH"}), "OK");
  auto d = AcquireOne(*store, "ns", l, 1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 7);  // charged exactly once
  EXPECT_GE(store->Stats().noscript_reloads, 1u);
  EXPECT_EQ(AcquireOne(*store, "ns", l, 0).value().remaining, 7);
}

TEST(RedisStore, ReconnectsAfterKillAndRestart) {
  TOLLGATE_START_REDIS(server);
  RedisOptions o;
  o.call_timeout = 200ms;
  o.connect_timeout = 200ms;
  auto store = MakeStore(server, o);
  ASSERT_NE(store, nullptr);
  const Limit l = Bucket(0.001, 3);
  ASSERT_TRUE(AcquireOne(*store, "rk", l, 1).value().allowed);
  server.Kill();
  auto down = AcquireOne(*store, "rk", l, 1);
  ASSERT_FALSE(down.ok());
  EXPECT_TRUE(down.status().code() == StatusCode::kConnection ||
              down.status().code() == StatusCode::kTimeout)
      << down.status().ToString();
  EXPECT_TRUE(WaitFor([&] { return !store->Healthy(); }));
  ASSERT_EQ(server.Restart(), "");
  // A fresh server (no persistence): state and script cache are gone.
  EXPECT_TRUE(WaitFor([&] {
    auto r = AcquireOne(*store, "rk", l, 1);
    return r.ok() && r->allowed && r->remaining == 2;
  }));
  EXPECT_TRUE(store->Healthy());
}

TEST(RedisStore, PausedServerTimesOutThenRecovers) {
  TOLLGATE_START_REDIS(server);
  RedisOptions o;
  o.call_timeout = 100ms;
  o.connect_timeout = 100ms;
  auto store = MakeStore(server, o);
  ASSERT_NE(store, nullptr);
  const Limit l = Bucket(0.001, 100);
  ASSERT_TRUE(AcquireOne(*store, "p", l, 1).value().allowed);
  server.Pause();
  const auto start = std::chrono::steady_clock::now();
  auto r = AcquireOne(*store, "p", l, 1);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout) << r.status().ToString();
  EXPECT_LT(took, Scaled(5s));  // bounded, not hung
  EXPECT_GE(store->Stats().timeouts, 1u);
  server.Resume();
  EXPECT_TRUE(WaitFor([&] {
    auto ok = AcquireOne(*store, "p", l, 1);
    return ok.ok() && ok->allowed;
  }));
}

TEST(RedisStore, UnreachableServerFailsFastWithConnectionError) {
  RedisOptions o;
  o.port = testing::FreeLoopbackPort();  // nothing listens there
  o.call_timeout = 2000ms;
  auto store = RedisStore::Create(o);
  ASSERT_TRUE(store.ok());
  const Limit l = Bucket(1, 1);
  // The first call may wait for the first connect attempt; later ones fail fast.
  ASSERT_TRUE(WaitFor([&] { return !(*store)->Healthy(); }));
  Result<Decision> r = AcquireOne(**store, "x", l, 1);
  for (int i = 0; i < 3 && r.ok(); ++i) r = AcquireOne(**store, "x", l, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConnection) << r.status().ToString();
}

TEST(RedisStore, HostileKeysNeverFormHashTagsOrGrowUnbounded) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const Limit l = Bucket(0.001, 1);
  const std::vector<std::string> hostile = {
      "{a}",     "}{", "x\r\nSET y 1", std::string(10240, '{'), std::string("nul\0byte", 8),
      "tg:other"};
  for (const auto& k : hostile) ASSERT_TRUE(AcquireOne(*store, k, l, 1).value().allowed);
  for (const auto& k : hostile) EXPECT_FALSE(AcquireOne(*store, k, l, 1).value().allowed);
  const std::string all = server.Command({"KEYS", "*"});
  size_t count = 0, start = 0;
  while (start <= all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    const std::string key = all.substr(start, end - start);
    EXPECT_EQ(key.rfind("tg:", 0), 0u) << key;
    EXPECT_EQ(key.find_first_of("{}\r "), std::string::npos) << key;
    EXPECT_LE(key.size(), 3 + redis::kMaxEscapedKey) << key;
    ++count;
    start = end + 1;
  }
  EXPECT_EQ(count, hostile.size());
  EXPECT_EQ(server.Command({"EXISTS", "y"}), "0");
}

TEST(RedisStore, AuthAndDatabaseNumber) {
  RedisServer::Options so;
  so.extra_args = {"--requirepass", "s3cret"};
  so.password = "s3cret";
  auto start = RedisServer::Start(so);
  if (start.missing) GTEST_SKIP() << start.error;
  ASSERT_TRUE(start) << start.error;
  auto url = ParseRedisUrl("redis://:s3cret@127.0.0.1:" + std::to_string(start->port()) + "/3");
  ASSERT_TRUE(url.ok());
  auto store = RedisStore::Create(*url);
  ASSERT_TRUE(store.ok());
  const Limit l = Bucket(0.001, 2);
  auto d = AcquireOne(**store, "authed", l, 1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->allowed);
  auto info = (*store)->Command({"CLIENT", "INFO"});
  ASSERT_TRUE(info.ok());
  EXPECT_NE(info->str.find(" db=3 "), std::string::npos) << info->str;

  url->password = "wrong";
  url->call_timeout = Scaled(300ms);
  auto bad = RedisStore::Create(*url);
  ASSERT_TRUE(bad.ok());
  auto denied = AcquireOne(**bad, "authed", l, 1);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kConnection) << denied.status().ToString();
}

// ACL login with a username (AUTH user password) on a real server: the store
// is who the URL says, and a wrong password is a typed connection error.
TEST(RedisStore, AclUserLogsInByName) {
  TOLLGATE_START_REDIS(server);
  ASSERT_EQ(server.Command({"ACL", "SETUSER", "alice", "on", ">secret", "~*", "+@all"}), "OK");
  const std::string hostport = "127.0.0.1:" + std::to_string(server.port());
  auto url = ParseRedisUrl("redis://alice:secret@" + hostport);
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  auto store = RedisStore::Create(*url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit l = Bucket(0.001, 2);
  auto d = AcquireOne(**store, "acl", l, 1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->allowed);
  auto who = (*store)->Command({"ACL", "WHOAMI"});
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->str, "alice");

  for (const char* bad : {"redis://alice:wrong@", "redis://bob:secret@"}) {
    auto bu = ParseRedisUrl(bad + hostport);
    ASSERT_TRUE(bu.ok());
    bu->call_timeout = Scaled(300ms);
    auto bs = RedisStore::Create(*bu);
    ASSERT_TRUE(bs.ok());
    auto denied = AcquireOne(**bs, "acl", l, 1);
    ASSERT_FALSE(denied.ok()) << bad;
    EXPECT_EQ(denied.status().code(), StatusCode::kConnection) << denied.status().ToString();
    EXPECT_NE(denied.status().ToString().find("WRONGPASS"), std::string::npos)
        << denied.status().ToString();
    // The refused login names the server, never the password it tried (issue 29).
    const std::string password = std::string(bad).substr(std::string(bad).find(':', 8) + 1);
    EXPECT_EQ(denied.status().ToString().find(password.substr(0, password.size() - 1)),
              std::string::npos)
        << denied.status().ToString();
  }
}

TEST(RedisStore, CommandRunsPlainCommandsOnThePool) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  auto set = store->Command({"SET", "hb:1", "alive", "PX", "60000"});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->type, RedisReply::Type::kStatus);
  auto get = store->Command({"GET", "hb:1"});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->str, "alive");
  auto err = store->Command({"NOSUCHCOMMAND"});
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->type, RedisReply::Type::kError);
}

TEST(RedisStore, RejectsUnsupportedAlgorithmsAndBadItems) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  LimitSpec s;
  s.algorithm = Algorithm::kSlidingLog;
  s.burst = 5;
  s.window = 1s;
  const Limit w = *Limit::Create(s);
  auto r = AcquireOne(*store, "w", w, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("sliding_log is not supported by the redis store"),
            std::string::npos)
      << r.status().ToString();
  const Limit l = Bucket(1, 1);
  auto neg = AcquireOne(*store, "n", l, -1);
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), StatusCode::kInvalidArgument);
}

TEST(RedisStore, DenyCacheAnswersCertainDenialsLocallyButNotAfterALimitChange) {
  TOLLGATE_START_REDIS(server);
  RedisOptions o;
  o.deny_cache = true;
  auto store = MakeStore(server, o);
  ASSERT_NE(store, nullptr);
  const Limit tight = Bucket(0.001, 1);
  ASSERT_TRUE(AcquireOne(*store, "dc", tight, 1).value().allowed);
  EXPECT_FALSE(AcquireOne(*store, "dc", tight, 1).value().allowed);  // learns
  const uint64_t calls = store->Stats().script_calls;
  auto cached = AcquireOne(*store, "dc", tight, 1);
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(cached->allowed);
  EXPECT_GT(cached->retry_after.count(), 0);
  EXPECT_EQ(store->Stats().script_calls, calls);
  EXPECT_EQ(store->Stats().deny_cache_hits, 1u);
  // A raised limit is decided by Redis, which allows it.
  const Limit roomy = Bucket(0.001, 5);
  EXPECT_TRUE(AcquireOne(*store, "dc", roomy, 1).value().allowed);
}

// The deny cache keeps its time on RedisOptions::clock: a cached denial is
// served until that clock passes its retry time, then Redis decides again.
// (Redis keeps its own time, TIME, so it still denies: the point is who answers.)
TEST(RedisStore, DenyCacheExpiresOnTheInjectedClock) {
  TOLLGATE_START_REDIS(server);
  ManualClock clock;
  RedisOptions o;
  o.deny_cache = true;
  o.clock = &clock;
  auto store = MakeStore(server, o);
  ASSERT_NE(store, nullptr);
  const Limit tight = Bucket(0.001, 1);  // one token per 1000 s
  ASSERT_TRUE(AcquireOne(*store, "dc-clock", tight, 1).value().allowed);
  auto denied = AcquireOne(*store, "dc-clock", tight, 1);  // learns
  ASSERT_TRUE(denied.ok());
  ASSERT_FALSE(denied->allowed);
  ASSERT_TRUE(AcquireOne(*store, "dc-clock", tight, 1).ok());
  EXPECT_EQ(store->Stats().deny_cache_hits, 1u);
  const uint64_t calls = store->Stats().script_calls;
  clock.Advance(denied->retry_after + std::chrono::seconds(1));
  auto again = AcquireOne(*store, "dc-clock", tight, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->allowed);
  EXPECT_EQ(store->Stats().deny_cache_hits, 1u);  // not from the cache
  EXPECT_EQ(store->Stats().script_calls, calls + 1);
}

}  // namespace
}  // namespace tollgate
