// RedisStore's Sentinel mode (redis-sentinel://) against real redis-server
// and redis-sentinel processes: decisions through the discovered master with
// separate sentinel and master passwords, the store contract, a failover
// under load (SIGKILL of the master, the replica promoted, decisions going on
// there) with its over-grant measured, all sentinels down under each failure
// mode, and hostile sentinels; then rediss-sentinel://, the failover again
// with every link on TLS, and a wrong CA.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "store_contract.h"
#include "testing/hostile_redis.h"
#include "testing/redis_server.h"
#include "testing/timing.h"
#include "tollgate/redis_store.h"
#include "tollgate/resilient_store.h"
#include "tollgate/store_spec.h"

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kMasterPassword = "master-secret";
constexpr const char* kSentinelPassword = "sentinel-secret";

std::string Port(int port) { return std::to_string(port); }

// A master (and optionally a replica of it) and one sentinel watching it as
// "m", all with passwords; down-after and failover-timeout short, so that a
// failover takes a few seconds.
//
// With tls every server also listens on a TLS port (one test CA, the
// master's), and everything the store reaches goes there: the sentinel
// monitors the master's TLS port and connects to it over TLS
// (tls-replication), the replica replicates over TLS and so announces its
// TLS port, and Url() names the sentinel's TLS port. The plain ports stay for
// the harness's own commands.
struct SentinelGroup {
  RedisServer::StartResult master, replica, sentinel;
  std::string error;
  bool missing = false;
  bool tls = false;

  RedisServer::Options Server() const {
    RedisServer::Options o;
    o.password = kMasterPassword;
    o.extra_args = {"--requirepass", kMasterPassword, "--masterauth", kMasterPassword};
    if (tls) {
      o.tls = true;
      if (master) o.tls_pki_dir = master->dir();
      o.extra_args.insert(o.extra_args.end(), {"--tls-replication", "yes"});
    }
    return o;
  }

  // The port the store (and the sentinel) reach a server on.
  int StorePort(const RedisServer& server) const { return tls ? server.tls_port() : server.port(); }

  static SentinelGroup Start(bool with_replica, bool tls = false) {
    SentinelGroup g;
    g.tls = tls;
    g.master = RedisServer::Start(g.Server());
    if (!g.master) {
      g.missing = g.master.missing;
      g.error = g.master.error;
      return g;
    }
    if (with_replica) {
      RedisServer::Options r = g.Server();
      r.extra_args.insert(r.extra_args.end(),
                          {"--replicaof", "127.0.0.1", Port(g.StorePort(*g.master))});
      g.replica = RedisServer::Start(r);
      if (!g.replica) {
        g.error = g.replica.error;
        return g;
      }
      // The sentinel sees the replica at its first INFO of the master when it is linked already.
      if (!WaitFor(
              [&] {
                return g.replica->Command({"INFO", "replication"}).find("master_link_status:up") !=
                       std::string::npos;
              },
              20s, 10ms)) {
        g.error = "the replica did not link to the master";
        return g;
      }
    }
    RedisServer::Options s;
    s.password = kSentinelPassword;
    if (tls) {
      s.tls = true;
      s.tls_pki_dir = g.master->dir();
      s.extra_args = {"--tls-replication", "yes"};  // a sentinel's links to the servers
    }
    s.sentinel_config = {
        "requirepass " + std::string(kSentinelPassword),
        "sentinel monitor m 127.0.0.1 " + Port(g.StorePort(*g.master)) + " 1",
        "sentinel auth-pass m " + std::string(kMasterPassword),
        "sentinel down-after-milliseconds m 500",
        "sentinel failover-timeout m 3000",
        "sentinel parallel-syncs m 1",
    };
    g.sentinel = RedisServer::Start(s);
    if (!g.sentinel) {
      g.missing = g.sentinel.missing;
      g.error = g.sentinel.error;
      return g;
    }
    if (with_replica && !WaitFor(
                            [&] {
                              return g.sentinel->Command({"SENTINEL", "replicas", "m"})
                                         .find("master-link-status\nok") != std::string::npos;
                            },
                            30s, 10ms)) {
      g.error = "the sentinel did not find the replica";
    }
    return g;
  }

  // The store URL: a sentinel that is down first (asked first, and skipped),
  // then the live one.
  // With tls, rediss-sentinel:// and the test CA (tls_ca_file, or `ca_file`).
  std::string Url(const std::string& query = "", const std::string& ca_file = "") const {
    std::string url = std::string(tls ? "rediss" : "redis") + "-sentinel://:" + kSentinelPassword +
                      "@127.0.0.1:" + Port(FreeLoopbackPort()) +
                      ",127.0.0.1:" + Port(StorePort(*sentinel)) +
                      "/m?master_password=" + kMasterPassword + query;
    if (tls) url += "&tls_ca_file=" + (ca_file.empty() ? master->ca_file() : ca_file);
    return url;
  }
};

#define TOLLGATE_START_SENTINELS(var, ...)      \
  auto var = SentinelGroup::Start(__VA_ARGS__); \
  if (var.missing) GTEST_SKIP() << var.error;   \
  ASSERT_TRUE(var.error.empty()) << var.error

std::unique_ptr<RedisStore> OpenSentinelStore(const std::string& url) {
  auto o = ParseRedisSentinelUrl(url);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  if (!o.ok()) return nullptr;
  o->call_timeout = Scaled(o->call_timeout);
  o->connect_timeout = Scaled(o->connect_timeout);
  auto s = RedisStore::Create(*o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

Limit Bucket(int64_t burst) {
  LimitSpec s;
  s.rate = 0.001;  // one token per 1000 s: no refill within a test
  s.burst = burst;
  return *Limit::Create(s);
}

// The contract suite on a store in Sentinel mode (one group for the suite).
SentinelGroup* SharedGroup() {
  static SentinelGroup group = SentinelGroup::Start(/*with_replica=*/false);
  return group.error.empty() ? &group : nullptr;
}

std::unique_ptr<Store> MakeSentinelStore() {
  SentinelGroup* g = SharedGroup();
  if (g == nullptr) return nullptr;
  return OpenSentinelStore(g->Url());
}

INSTANTIATE_TEST_SUITE_P(RedisSentinel, StoreContractTest,
                         ::testing::Values(StoreFactory(MakeSentinelStore)));

TEST(RedisSentinel, DecidesOnTheMasterTheSentinelsNameWithSeparatePasswords) {
  TOLLGATE_START_SENTINELS(g, /*with_replica=*/false);
  auto store = OpenSentinelStore(g.Url("&prefix=sn:"));
  ASSERT_NE(store, nullptr);
  const Limit limit = Bucket(3);
  for (int i = 0; i < 3; ++i) {
    auto d = AcquireOne(*store, "k", limit, 1);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_TRUE(d->allowed) << i;
  }
  auto denied = AcquireOne(*store, "k", limit, 1);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(store->MasterEndpoint(), "127.0.0.1:" + Port(g.master->port()));
  EXPECT_TRUE(store->Healthy());
  // The state is on the master (with the master's password).
  EXPECT_NE(g.master->Command({"EXISTS", store->RedisKeyFor("k")}), "0");

  // The master's password is not the sentinels': without master_password the
  // master refuses the store, which says so without either password.
  auto wrong = OpenSentinelStore("redis-sentinel://:" + std::string(kSentinelPassword) +
                                 "@127.0.0.1:" + Port(g.sentinel->port()) + "/m");
  ASSERT_NE(wrong, nullptr);
  auto refused = AcquireOne(*wrong, "k", limit, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kConnection) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("NOAUTH"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find(kSentinelPassword), std::string::npos);
  EXPECT_EQ(refused.status().message().find(kMasterPassword), std::string::npos);
  EXPECT_EQ(wrong->MasterEndpoint(), "");

  // An unknown master name: the sentinel does not know it.
  auto unknown = OpenSentinelStore("redis-sentinel://:" + std::string(kSentinelPassword) +
                                   "@127.0.0.1:" + Port(g.sentinel->port()) + "/other");
  ASSERT_NE(unknown, nullptr);
  auto none = AcquireOne(*unknown, "k", limit, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("does not know a master named 'other'"), std::string::npos)
      << none.status().message();
}

TEST(RedisSentinel, AllSentinelsDownIsAnOutageTheFailureModesDecide) {
  const std::string url = "redis-sentinel://:" + std::string(kSentinelPassword) +
                          "@127.0.0.1:" + Port(FreeLoopbackPort()) +
                          ",127.0.0.1:" + Port(FreeLoopbackPort()) +
                          "/m?master_password=" + kMasterPassword;
  const Limit limit = Bucket(3);
  // Bare: a connection error naming every sentinel's failure, no password.
  auto bare = OpenSentinelStore(url);
  ASSERT_NE(bare, nullptr);
  auto failed = AcquireOne(*bare, "k", limit, 1);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kConnection) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("no sentinel named a reachable master 'm'"),
            std::string::npos)
      << failed.status().message();
  EXPECT_EQ(failed.status().message().find("secret"), std::string::npos);
  EXPECT_FALSE(bare->Healthy());

  // Through the store spec, as tollgated opens it: each failure mode applies.
  for (FailureMode mode : {FailureMode::kOpen, FailureMode::kClosed, FailureMode::kDegrade}) {
    SCOPED_TRACE(FailureModeName(mode));
    StoreSpec spec;
    spec.url = url;
    spec.call_timeout = Scaled(std::chrono::milliseconds(500));
    spec.resilience = ResilienceSpec{};
    spec.resilience->mode = mode;
    spec.resilience->degrade_fraction = 0.5;
    spec.resilience->fleet = false;
    auto opened = OpenStore(spec);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_NE(opened->description.find("redis-sentinel master 'm'"), std::string::npos)
        << opened->description;
    EXPECT_EQ(opened->description.find("secret"), std::string::npos) << opened->description;
    ASSERT_NE(opened->redis, nullptr);
    ASSERT_NE(opened->resilient, nullptr);
    int allowed = 0;
    for (int i = 0; i < 5; ++i) {
      auto d = AcquireOne(*opened->store, "k", limit, 1);
      if (mode == FailureMode::kClosed) {
        ASSERT_FALSE(d.ok());
        EXPECT_EQ(d.status().code(), StatusCode::kUnavailable) << d.status().ToString();
        continue;
      }
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      allowed += d->allowed ? 1 : 0;
    }
    // open: everything passes; degrade: half the burst (1 of 3) on the local store.
    EXPECT_EQ(allowed, mode == FailureMode::kOpen ? 5 : mode == FailureMode::kDegrade ? 1 : 0);
    EXPECT_FALSE(opened->BackingHealthy());
  }
}

TEST(RedisSentinel, HostileSentinelsGiveClearErrorsNeverAHang) {
  const Limit limit = Bucket(3);
  using Reply = HostileRedis::Reply;
  for (Reply reply : {Reply::kWrongType, Reply::kHugeArray, Reply::kNegativeLength,
                      Reply::kDeepNesting, Reply::kEndlessBulk, Reply::kSilence}) {
    std::string error;
    HostileRedis::Options ho;
    ho.reply = reply;
    auto hostile = HostileRedis::Start(ho, &error);
    ASSERT_NE(hostile, nullptr) << error;
    // Short timeouts: a silent sentinel costs connect_timeout, never more.
    auto store = OpenSentinelStore("redis-sentinel://127.0.0.1:" + Port(hostile->port()) +
                                   "/m?timeout_ms=300&connect_timeout_ms=300");
    ASSERT_NE(store, nullptr);
    auto d = AcquireOne(*store, "k", limit, 1);
    ASSERT_FALSE(d.ok()) << static_cast<int>(reply);
    EXPECT_TRUE(d.status().code() == StatusCode::kConnection ||
                d.status().code() == StatusCode::kTimeout)
        << d.status().ToString();
    EXPECT_EQ(store->MasterEndpoint(), "");
    EXPECT_TRUE(hostile->Received("PING") || reply == Reply::kSilence);
  }
}

// The failover: four clients keep deciding on one key (burst kBurst, no
// refill) while the master is SIGKILLed; the sentinel promotes the replica
// and the store follows it. Every grant the master acknowledged but had not
// yet replicated is lost with it, so the replica grants that many again:
// the over-grant, measured here and bounded by what the master had granted.
void FailoverUnderLoad(const SentinelGroup& g, const char* label) {
  auto store = OpenSentinelStore(g.Url());
  ASSERT_NE(store, nullptr);
  constexpr int64_t kBurst = 3000;
  const Limit limit = Bucket(kBurst);
  ASSERT_TRUE(WaitFor([&] { return AcquireOne(*store, "warm", limit, 1).ok(); }, 10s, 10ms));
  const std::string old_master = "127.0.0.1:" + Port(g.StorePort(*g.master));
  const std::string new_master = "127.0.0.1:" + Port(g.StorePort(*g.replica));
  ASSERT_EQ(store->MasterEndpoint(), old_master);

  std::atomic<int64_t> allowed{0}, denied{0}, failed{0}, timed_out{0}, allowed_on_new{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> first_failure_ns{0}, first_new_success_ns{0};
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      while (!stop.load()) {
        const bool on_new = store->MasterEndpoint() == new_master;
        auto d = AcquireOne(*store, "k", limit, 1);
        if (!d.ok()) {
          failed.fetch_add(1);
          // A timed-out call may have been charged: its outcome is unknown.
          if (d.status().code() == StatusCode::kTimeout) timed_out.fetch_add(1);
          int64_t zero = 0;
          first_failure_ns.compare_exchange_strong(zero, now_ns());
          // Paced by the store's own health, not a sleep: wait (bounded) for a master.
          PollUntil([&] { return stop.load() || store->Healthy(); }, 50ms, 1ms);
          continue;
        }
        if (d->allowed) {
          allowed.fetch_add(1);
          if (on_new) {
            allowed_on_new.fetch_add(1);
            int64_t zero = 0;
            first_new_success_ns.compare_exchange_strong(zero, now_ns());
          }
        } else {
          denied.fetch_add(1);
          if (on_new && first_new_success_ns.load() == 0) {
            int64_t zero = 0;
            first_new_success_ns.compare_exchange_strong(zero, now_ns());
          }
        }
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return allowed.load() >= kBurst / 3; }, 30s, 1ms));
  const int64_t kill_ns = now_ns();
  g.master->Kill();
  const int64_t allowed_at_kill = allowed.load();
  // The sentinel promotes the replica; the store follows; the limit runs out there.
  const bool switched = WaitFor([&] { return store->MasterEndpoint() == new_master; }, 60s, 2ms);
  const bool exhausted = switched && WaitFor([&] { return denied.load() >= 100; }, 60s, 2ms);
  stop = true;
  for (auto& c : clients) c.join();
  ASSERT_TRUE(switched) << "master still " << store->MasterEndpoint();
  ASSERT_TRUE(exhausted) << "allowed " << allowed.load() << " denied " << denied.load();

  const int64_t overgrant = allowed.load() - kBurst;
  const double without_master_ms =
      first_new_success_ns.load() > 0 ? (first_new_success_ns.load() - kill_ns) / 1e6 : -1;
  std::printf(
      "%s: burst %lld, allowed %lld (at kill %lld, on the new master %lld), "
      "denied %lld, failed %lld (timed out %lld), over-grant %lld, no master for %.0f ms\n",
      label, static_cast<long long>(kBurst), static_cast<long long>(allowed.load()),
      static_cast<long long>(allowed_at_kill), static_cast<long long>(allowed_on_new.load()),
      static_cast<long long>(denied.load()), static_cast<long long>(failed.load()),
      static_cast<long long>(timed_out.load()), static_cast<long long>(overgrant),
      without_master_ms);
  ::testing::Test::RecordProperty("overgrant", std::to_string(overgrant));
  ::testing::Test::RecordProperty("without_master_ms", std::to_string(without_master_ms));
  EXPECT_GT(allowed_on_new.load(), 0);  // decisions went on, on the promoted replica
  EXPECT_GT(failed.load(), 0);          // the outage was seen (the failure modes' business)
  // Over the limit by at most what the dead master had granted and not
  // replicated (a part of the grants before the kill); under it by at most
  // the calls that failed after being charged (in flight at the kill, their
  // answer lost with the connection, or timed out).
  EXPECT_LE(overgrant, allowed_at_kill);
  EXPECT_GE(overgrant, -failed.load());
  EXPECT_EQ(g.replica->Command({"ROLE"}).substr(0, 6), "master");
  EXPECT_GE(store->Stats().master_changes, 1u);
}

TEST(RedisSentinel, FailoverUnderLoadContinuesOnThePromotedReplica) {
  TOLLGATE_START_SENTINELS(g, /*with_replica=*/true);
  FailoverUnderLoad(g, "sentinel failover");
}

// rediss-sentinel://: the same failover with every link the store makes on
// TLS (the sentinels' and the servers' plain ports are never named to it, and
// a plaintext client cannot speak to a TLS port), verified against the test CA.
TEST(RedisSentinel, OverTlsFailoverUnderLoadContinuesOnThePromotedReplica) {
  TOLLGATE_START_SENTINELS(g, /*with_replica=*/true, /*tls=*/true);
  FailoverUnderLoad(g, "sentinel failover over TLS");
}

// rediss-sentinel:// verifies the sentinels' certificates: a CA that signed
// none of them finds no master, with a clear error, a bounded wait and no
// password in it; and a plaintext redis-sentinel:// URL on the TLS port does
// not get a master either.
TEST(RedisSentinel, OverTlsAWrongCaOrPlaintextFindsNoMaster) {
  TOLLGATE_START_SENTINELS(g, /*with_replica=*/false, /*tls=*/true);
  const Limit limit = Bucket(3);
  auto good = OpenSentinelStore(g.Url());
  ASSERT_NE(good, nullptr);
  auto ok = AcquireOne(*good, "k", limit, 1);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(good->MasterEndpoint(), "127.0.0.1:" + Port(g.master->tls_port()));

  auto wrong_ca =
      OpenSentinelStore(g.Url("&timeout_ms=300&connect_timeout_ms=300", g.master->other_ca_file()));
  ASSERT_NE(wrong_ca, nullptr);
  auto refused = AcquireOne(*wrong_ca, "k", limit, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kConnection) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("certificate verify failed"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find(kSentinelPassword), std::string::npos);
  EXPECT_EQ(refused.status().message().find(kMasterPassword), std::string::npos);
  EXPECT_EQ(wrong_ca->MasterEndpoint(), "");

  auto plaintext = OpenSentinelStore(
      "redis-sentinel://:" + std::string(kSentinelPassword) +
      "@127.0.0.1:" + Port(g.sentinel->tls_port()) +
      "/m?timeout_ms=300&connect_timeout_ms=300&master_password=" + kMasterPassword);
  ASSERT_NE(plaintext, nullptr);
  EXPECT_FALSE(AcquireOne(*plaintext, "k", limit, 1).ok());
  EXPECT_EQ(plaintext->MasterEndpoint(), "");
}

// A coordinated failover (SENTINEL FAILOVER): the old master stays up and
// becomes a replica; the store learns of it from +switch-master (or from a
// READONLY reply) and moves, and decisions go on with the limit intact.
TEST(RedisSentinel, CoordinatedFailoverIsFollowed) {
  TOLLGATE_START_SENTINELS(g, /*with_replica=*/true);
  auto store = OpenSentinelStore(g.Url());
  ASSERT_NE(store, nullptr);
  const Limit limit = Bucket(1000);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(AcquireOne(*store, "k", limit, 1).ok());
  const std::string new_master = "127.0.0.1:" + Port(g.replica->port());
  EXPECT_EQ(g.sentinel->Command({"SENTINEL", "FAILOVER", "m"}), "OK");
  int64_t allowed = 10, failed = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto d = AcquireOne(*store, "k", limit, 1);
        if (!d.ok()) {
          ++failed;
        } else {
          allowed += d->allowed ? 1 : 0;
        }
        return store->MasterEndpoint() == new_master;
      },
      60s, 2ms))
      << store->MasterEndpoint();
  // The state followed (replicated before the switch), and the limit holds there.
  ASSERT_TRUE(WaitFor([&] { return AcquireOne(*store, "k", limit, 1).ok(); }, 10s, 2ms));
  ++allowed;
  auto peek = InspectKey(*store, "k", limit);
  ASSERT_TRUE(peek.ok()) << peek.status().ToString();
  // Lost: grants the old master made after the replica's promotion, before
  // the sentinel announced the switch (it then becomes a replica and drops
  // them): the new master does not hold their charge, so they are granted again.
  const int64_t charged = 1000 - peek->remaining;
  std::printf(
      "coordinated failover: allowed %lld, failed %lld, charged on the new master %lld, "
      "lost (over-grant) %lld\n",
      static_cast<long long>(allowed), static_cast<long long>(failed),
      static_cast<long long>(charged), static_cast<long long>(allowed - charged));
  ::testing::Test::RecordProperty("lost", std::to_string(allowed - charged));
  EXPECT_LE(charged, allowed + failed);  // nothing charged twice
  EXPECT_GE(charged, 11);                // the first ten were replicated before the failover began
  EXPECT_GE(store->Stats().master_changes, 1u);
}

}  // namespace
}  // namespace tollgate::testing
