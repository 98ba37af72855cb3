// RedisClusterStore through failovers (3 masters + 3 replicas): a coordinated
// CLUSTER FAILOVER and a killed master. Decisions must recover within a
// bounded time (scaled for a loaded machine: the cluster's own gossip and
// elections slow down with it); writes lost by asynchronous replication are
// measured.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cluster/redis_cluster.h"
#include "testing/timing.h"
#include "tollgate/redis_cluster_store.h"

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

Limit Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

std::unique_ptr<RedisClusterStore> MakeStore(const std::string& url) {
  auto o = ParseRedisClusterUrl(url);
  if (!o.ok()) return nullptr;
  o->node.call_timeout = Scaled(300ms);
  o->node.connect_timeout = Scaled(300ms);
  auto s = RedisClusterStore::Create(*o);
  if (!s.ok()) return nullptr;
  WaitFor([&] { return (*s)->Healthy(); }, 10s, 5ms);
  return std::move(*s);
}

// The replica (node index) of master `master`, -1 if none.
int ReplicaOf(RedisCluster& c, int master) {
  const std::string id = c.NodeId(static_cast<size_t>(master));
  for (size_t i = 0; i < c.size(); ++i) {
    if (static_cast<int>(i) == master || !c.node(i).running()) continue;
    const std::string info = c.node(i).Command({"INFO", "replication"});
    if (info.find("role:slave") == std::string::npos) continue;
    if (info.find("master_port:" + std::to_string(c.node(static_cast<size_t>(master)).port())) !=
        std::string::npos) {
      return static_cast<int>(i);
    }
  }
  (void)id;
  return -1;
}

// Runs load on `key` until stopped; records allowed decisions and the time of
// the last error so the test can measure recovery.
struct Load {
  RedisClusterStore& store;
  std::string key;
  Limit limit;
  std::atomic<bool> stop{false};
  std::atomic<int> allowed{0}, errors{0}, ok_after_mark{0};
  std::atomic<int64_t> last_error_ns{0};
  std::atomic<bool> mark{false};
  std::vector<std::thread> threads{};  // {}: Load{store, key, limit} leaves it out
  void Start(int n) {
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([this] {
        while (!stop.load()) {
          auto r = AcquireOne(store, key, limit, 1);
          if (!r.ok()) {
            errors.fetch_add(1);
            last_error_ns.store(SteadyClock::now().time_since_epoch().count());
          } else {
            if (r->allowed) allowed.fetch_add(1);
            if (mark.load()) ok_after_mark.fetch_add(1);
          }
        }
      });
    }
  }
  void Stop() {
    stop.store(true);
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
  ~Load() { Stop(); }  // a failed ASSERT returns early: never leave threads running
};

TEST(RedisClusterFailover, CoordinatedFailoverAndKilledMasterRecover) {
  RedisCluster::Options opts;
  opts.replicas_per_master = 1;
  opts.node_timeout_ms = 1000;
  TOLLGATE_START_REDIS_CLUSTER(cluster, opts);
  auto store = MakeStore(cluster.url());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Healthy());
  const std::string key = "fo\x1ftoken_bucket\x1fuser-failover";
  const int slot = RedisClusterStore::SlotOf(store->RedisKeyFor(key));
  // A bucket that does not refill during the test: every lost write shows up
  // as tokens granted again after the failover.
  const Limit l = Bucket(0.001, 1'000'000);
  Load load{*store, key, l};
  load.Start(8);
  ASSERT_TRUE(WaitFor([&] { return load.allowed.load() > 500; }, 10s));

  // 1. Coordinated failover: the replica takes over without losing writes.
  int master = cluster.MasterOfSlot(slot);
  ASSERT_GE(master, 0);
  int replica = ReplicaOf(cluster, master);
  ASSERT_GE(replica, 0);
  // Redis gives up a manual failover it cannot finish in 5 s (CLUSTER_MF_TIMEOUT),
  // which a loaded 2-core machine can hit: ask again, a bounded number of times.
  bool promoted = false;
  for (int attempt = 0; attempt < 3 && !promoted; ++attempt) {
    ASSERT_EQ(cluster.node(static_cast<size_t>(replica)).Command({"CLUSTER", "FAILOVER"}), "OK");
    promoted = WaitFor([&] { return cluster.MasterOfSlot(slot) == replica; }, 8s);
  }
  ASSERT_TRUE(promoted) << "CLUSTER FAILOVER did not complete in 3 attempts";
  const auto t1 = SteadyClock::now();
  load.mark.store(true);
  load.ok_after_mark.store(0);
  ASSERT_TRUE(WaitFor([&] { return load.ok_after_mark.load() > 100; }, 5s))
      << "decisions did not recover after CLUSTER FAILOVER";
  const double recover1_ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - t1).count();

  // 2. Kill the new master: its replica (the old master) is promoted after node-timeout.
  const int victim = replica;
  const int heir = master;
  cluster.node(static_cast<size_t>(victim)).Kill();
  const auto t2 = SteadyClock::now();
  load.mark.store(false);
  // Redis promotes it on its own once the masters agree the victim failed;
  // on a loaded machine that election can miss its round (the votes' timeouts
  // are a few node-timeouts): an operator would then take over by hand, and
  // so does the test, since what it checks is the store's recovery.
  bool heir_promoted = WaitFor([&] { return cluster.MasterOfSlot(slot) == heir; }, 20s);
  if (!heir_promoted) {
    std::fprintf(stderr, "automatic failover did not finish in time; CLUSTER FAILOVER TAKEOVER\n");
    ASSERT_EQ(cluster.node(static_cast<size_t>(heir)).Command({"CLUSTER", "FAILOVER", "TAKEOVER"}),
              "OK");
    heir_promoted = WaitFor([&] { return cluster.MasterOfSlot(slot) == heir; }, 10s);
  }
  ASSERT_TRUE(heir_promoted) << "replica was not promoted";
  // The store's recovery is timed from the promotion, as in part 1: how long
  // Redis takes to elect the heir (or the test to take over) is Redis's and the
  // machine's, and used to eat the whole bound on a loaded machine (CI,
  // 2026-12-03: 80,025 ms against 80,000 with the election missed).
  const auto t3 = SteadyClock::now();
  const double failover_ms = std::chrono::duration<double, std::milli>(t3 - t2).count();
  load.ok_after_mark.store(0);
  load.mark.store(true);
  ASSERT_TRUE(WaitFor([&] { return load.ok_after_mark.load() > 100; }, 10s))
      << "decisions did not recover after the master was killed";
  const double recover2_ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - t3).count();
  load.Stop();

  // Lost writes: tokens Redis remembers as used vs decisions we saw allowed.
  auto peek = AcquireOne(*store, key, l, 0);
  ASSERT_TRUE(peek.ok()) << peek.status().ToString();
  const int64_t used_in_redis = l.burst() - peek->remaining;
  const int64_t lost = load.allowed.load() - used_in_redis;
  std::printf(
      "failover: coordinated recovery %.0f ms, killed master: heir promoted after %.0f ms "
      "(node-timeout 1000 ms), recovery %.0f ms after that; allowed %d, recorded in redis %lld, "
      "lost writes %lld; errors during failover %d\n",
      recover1_ms, failover_ms, recover2_ms, load.allowed.load(),
      static_cast<long long>(used_in_redis), static_cast<long long>(lost), load.errors.load());
  // A call that timed out at the client may still have run on Redis: it is
  // recorded but was never reported as allowed (an under-grant, the safe
  // side). So Redis may hold up to `errors` more than we saw allowed, never
  // more: a retry that charged a decision twice would push it past that.
  EXPECT_GE(lost, -static_cast<int64_t>(load.errors.load()))
      << "Redis recorded more than allowed + failed calls: a decision was charged twice";
  EXPECT_LT(recover1_ms, Scaled(5s).count()) << "time scale " << TimeScale();
  EXPECT_LT(recover2_ms, Scaled(5s).count()) << "time scale " << TimeScale();
  const auto stats = store->Stats();
  EXPECT_GE(stats.refreshes, 2u);
}

}  // namespace
}  // namespace tollgate::testing
