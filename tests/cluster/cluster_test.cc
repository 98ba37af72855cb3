// RedisClusterStore against a real 3-master cluster: the store contract,
// exactness on keys spread over all masters, cross-node batches, and a slot
// migration under load (ASK and MOVED) without errors or over-grant.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "base/one_shot.h"
#include "cluster/redis_cluster.h"
#include "lease_cases.h"
#include "lease_prediction.h"
#include "period_cases.h"
#include "redis/window_agreement.h"
#include "settle_contract.h"
#include "testing/timing.h"
#include "tollgate/redis_cluster_store.h"
#include "tollgate/rollback_fleet.h"

namespace tollgate::testing {

RedisCluster* SharedCluster() {
  static auto start = RedisCluster::Start(RedisCluster::Options{});
  if (!start.cluster && !start.error.empty()) {
    std::fprintf(stderr, "cluster fixture: %s\n", start.error.c_str());
  }
  return start.cluster.get();
}

// Waits (bounded) until `store` has read its first topology; false on timeout.
bool WaitHealthy(const RedisClusterStore& store) {
  return WaitFor([&] { return store.Healthy(); }, std::chrono::seconds(10),
                 std::chrono::milliseconds(5));
}

// A store on the cluster; `timeout` (its calls' timeout) is scaled for a loaded machine.
std::unique_ptr<RedisClusterStore> MakeClusterStore(
    const std::string& url, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
  auto o = ParseRedisClusterUrl(url);
  if (!o.ok()) return nullptr;
  o->node.call_timeout = Scaled(timeout);
  auto s = RedisClusterStore::Create(*o);
  if (!s.ok()) return nullptr;
  WaitHealthy(**s);
  return std::move(*s);
}

std::unique_ptr<Store> MakeSharedClusterStore() {
  RedisCluster* c = SharedCluster();
  if (c == nullptr) return nullptr;
  return MakeClusterStore(c->url());
}

INSTANTIATE_TEST_SUITE_P(RedisCluster, StoreContractTest,
                         ::testing::Values(StoreFactory(MakeSharedClusterStore)));
INSTANTIATE_TEST_SUITE_P(RedisCluster, SettleContractTest,
                         ::testing::Values(StoreFactory(MakeSharedClusterStore)));

namespace {

using namespace std::chrono_literals;

Limit Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

// An item key "rule\x1ftoken_bucket\x1f<identity>" whose slot is served by master `want`.
std::string KeyOnMaster(RedisCluster& cluster, RedisClusterStore& store, int want,
                        const std::string& rule, std::map<int, int>& slot_master) {
  for (int i = 0; i < 100000; ++i) {
    const std::string key = rule + "\x1ftoken_bucket\x1fid-" + std::to_string(i);
    const int slot = RedisClusterStore::SlotOf(store.RedisKeyFor(key));
    auto it = slot_master.find(slot);
    if (it == slot_master.end()) it = slot_master.emplace(slot, cluster.MasterOfSlot(slot)).first;
    if (it->second == want) return key;
  }
  return "";
}

TEST(RedisClusterStore, ExactOnKeysSpreadOverAllMasters) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store = MakeClusterStore(cluster->url());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Healthy());
  EXPECT_EQ(store->Stats().masters, 3u);
  std::map<int, int> slot_master;
  std::vector<std::string> keys;
  for (int m = 0; m < 3; ++m) {
    keys.push_back(KeyOnMaster(*cluster, *store, m, "og" + std::to_string(m), slot_master));
    ASSERT_FALSE(keys.back().empty());
  }
  // The seed's over-grant test on each key at once: burst 10, 10/s, 3 s, 64 callers.
  const Limit l = Bucket(10, 10);
  std::vector<std::atomic<int>> allowed(keys.size());
  std::atomic<int> errors{0};
  const auto start = std::chrono::steady_clock::now();
  const auto stop = start + 3s;
  std::vector<std::thread> threads;
  for (int t = 0; t < 64; ++t) {
    threads.emplace_back([&, t] {
      const size_t k = static_cast<size_t>(t) % keys.size();
      while (std::chrono::steady_clock::now() < stop) {
        auto r = AcquireOne(*store, keys[k], l, 1);
        if (!r.ok()) {
          errors.fetch_add(1);
        } else if (r->allowed) {
          allowed[k].fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(errors.load(), 0);
  for (size_t k = 0; k < keys.size(); ++k) {
    // At most burst + rate * elapsed (elapsed includes the last replies' flight).
    EXPECT_LE(allowed[k].load(), 10 + static_cast<int>(10 * secs)) << k;
    // And the limiter did grant: the burst and refills (how many depends on how
    // fast a loaded machine asks, so only that there were some).
    EXPECT_GT(allowed[k].load(), 10) << k;
  }
}

TEST(RedisClusterStore, CrossNodeBatchChargesNothingWhenDenied) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store = MakeClusterStore(cluster->url());
  ASSERT_NE(store, nullptr);
  std::map<int, int> slot_master;
  const std::string a = KeyOnMaster(*cluster, *store, 0, "xa", slot_master);
  const std::string b = KeyOnMaster(*cluster, *store, 1, "xb", slot_master);
  const Limit roomy = Bucket(0.001, 5), tight = Bucket(0.001, 1);
  ASSERT_TRUE(AcquireOne(*store, b, tight, 1).value().allowed);
  AcquireItem items[] = {{a, &roomy, 2}, {b, &tight, 1}};
  auto r = store->Acquire(items);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->denied_index, 1);
  EXPECT_EQ(AcquireOne(*store, a, roomy, 0).value().remaining, 5);
  const std::string c = KeyOnMaster(*cluster, *store, 2, "xc", slot_master);
  AcquireItem ok_items[] = {{a, &roomy, 2}, {c, &tight, 1}};
  auto ok = store->Acquire(ok_items);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->allowed);
  EXPECT_EQ(AcquireOne(*store, a, roomy, 0).value().remaining, 3);
  EXPECT_GE(store->Stats().cross_node_batches, 2u);
}

// Fixed window, sliding window and token bucket on three masters in one
// batch: the dry runs decide it, a denial anywhere charges nothing anywhere.
// The race between dry run and charge, lost on purpose: after part 0 (master
// 0) is charged, another client exhausts the key of part 1 (master 1). The
// batch is denied and part 0's charges are given back: a token bucket is
// whole again, and so are a fixed and a sliding window (still in the window
// their charge reported). With `move_windows` the hook also moves the window
// keys into their next window (count 4) first: their refunds are dropped (an
// under-grant, never an over-grant) and the later window keeps its count.
// `quota` is the fixed window's: above 9999999 its counts are 13 digits.
void LoseTheRaceAndRefund(bool move_windows, int64_t quota = 5) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto probe = MakeClusterStore(cluster->url());
  ASSERT_NE(probe, nullptr);
  std::map<int, int> slot_master;
  const std::string tag = std::string(move_windows ? "m" : "s") + (quota > 5 ? "q" : "");
  const int fixed_digits = quota > 9'999'999 ? 13 : 7;
  const std::string a = KeyOnMaster(*cluster, *probe, 0, "ra" + tag, slot_master);
  const std::string a2 = KeyOnMaster(*cluster, *probe, 0, "rw" + tag, slot_master);
  const std::string a3 = KeyOnMaster(*cluster, *probe, 0, "rs" + tag, slot_master);
  const std::string b = KeyOnMaster(*cluster, *probe, 1, "rb" + tag, slot_master);
  ASSERT_FALSE(a.empty() || a2.empty() || a3.empty() || b.empty());
  const std::string b_redis = probe->RedisKeyFor(b);
  const int b_master = slot_master.at(RedisClusterStore::SlotOf(b_redis));

  const Limit roomy = Bucket(0.001, 5), tight = Bucket(0.001, 1);
  LimitSpec ws;
  ws.algorithm = Algorithm::kFixedWindow;
  ws.burst = quota;
  ws.window = std::chrono::hours(24);
  auto window = Limit::Create(ws);
  ASSERT_TRUE(window.ok()) << window.status().ToString();
  ws.algorithm = Algorithm::kSlidingWindow;
  ws.burst = 5;
  auto sliding = Limit::Create(ws);
  ASSERT_TRUE(sliding.ok()) << sliding.status().ToString();
  const std::string a2_redis = probe->RedisKeyFor(a2) + (fixed_digits == 13 ? "|fq:" : "|fw:") +
                               std::to_string(window->window_ns());
  const std::string a3_redis =
      probe->RedisKeyFor(a3) + "|sw:" + std::to_string(sliding->window_ns());
  const auto a_master = static_cast<size_t>(slot_master.at(RedisClusterStore::SlotOf(a2_redis)));
  ASSERT_EQ(a_master, static_cast<size_t>(slot_master.at(RedisClusterStore::SlotOf(a3_redis))));

  auto o = ParseRedisClusterUrl(cluster->url());
  ASSERT_TRUE(o.ok());
  o->node.call_timeout = Scaled(2000ms);
  std::atomic<int> hooks{0};
  std::string hook_error;
  o->before_cross_charge_for_testing = [&](size_t part) {
    if (part != 1) return;
    hooks.fetch_add(1);
    // Another client takes b's last token: its TAT jumps an hour ahead.
    const int64_t tat = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch() + 1h)
                            .count();
    bool ok = false;
    cluster->node(static_cast<size_t>(b_master))
        .Command({"SET", b_redis, std::to_string(tat)}, &ok);
    if (!ok) hook_error = "SET failed";
    if (!move_windows) return;
    // The windows move on: each key is in its next window with a count of 4.
    for (const auto& [key, counts] : {std::pair{a2_redis, fixed_digits}, std::pair{a3_redis, 14}}) {
      const std::string v = cluster->node(a_master).Command({"GET", key}, &ok);
      if (!ok || v.size() <= static_cast<size_t>(counts)) {
        hook_error = "GET " + key + " returned '" + v + "'";
        return;
      }
      const std::string next = std::to_string(std::stoll(v.substr(0, v.size() - counts)) + 1) +
                               std::string(static_cast<size_t>(counts) - 1, '0') + "4";
      cluster->node(a_master).Command({"SET", key, next, "KEEPTTL"}, &ok);
      if (!ok) hook_error = "SET " + key + " failed";
    }
  };
  auto created = RedisClusterStore::Create(*o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto& store = *created;
  ASSERT_TRUE(WaitHealthy(*store));

  // A large quota's charge reaches above the low 7 digits of its count.
  const int64_t fixed_cost = quota > 5 ? quota - 3 : 2;
  AcquireItem items[] = {
      {a, &roomy, 2}, {a2, &*window, fixed_cost}, {a3, &*sliding, 3}, {b, &tight, 1}};
  auto r = store->Acquire(items);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(hooks.load(), 1);
  EXPECT_TRUE(hook_error.empty()) << hook_error;
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->denied_index, 3);
  EXPECT_EQ(store->Stats().cross_node_refunds, 1u);
  // The batch answered after its refund did.
  EXPECT_EQ(AcquireOne(*store, a, roomy, 0).value().remaining, 5);
  const int64_t left = move_windows ? 1 : 5;
  const int64_t fixed_left = move_windows ? quota - 4 : quota;
  EXPECT_EQ(AcquireOne(*store, a2, *window, 0).value().remaining, fixed_left);
  EXPECT_EQ(AcquireOne(*store, a3, *sliding, 0).value().remaining, left);
  // Each refunded key grants exactly what it has left, and not one more.
  EXPECT_TRUE(AcquireOne(*store, a, roomy, 5).value().allowed);
  EXPECT_FALSE(AcquireOne(*store, a, roomy, 1).value().allowed);
  for (const auto& [key, limit, room] :
       {std::tuple{a2, &*window, fixed_left}, std::tuple{a3, &*sliding, left}}) {
    EXPECT_TRUE(AcquireOne(*store, key, *limit, room).value().allowed) << key;
    EXPECT_FALSE(AcquireOne(*store, key, *limit, 1).value().allowed) << key;
  }
}

TEST(RedisClusterStore, CrossNodeBatchThatLosesTheRaceRefundsEarlierMasters) {
  LoseTheRaceAndRefund(/*move_windows=*/false);
}

TEST(RedisClusterStore, CrossNodeWindowRefundIsDroppedOnceTheWindowMovedOn) {
  LoseTheRaceAndRefund(/*move_windows=*/true);
}

// The same with a quota of 13-digit counts (the refund script reads its width).
TEST(RedisClusterStore, CrossNodeRefundOfALargeQuota) {
  LoseTheRaceAndRefund(/*move_windows=*/false, 10'000'005);
  LoseTheRaceAndRefund(/*move_windows=*/true, 10'000'005);
}

TEST(RedisClusterStore, CrossNodeMixedWindowBatchIsAllOrNothing) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store = MakeClusterStore(cluster->url());
  ASSERT_NE(store, nullptr);
  std::map<int, int> slot_master;
  const std::string f = KeyOnMaster(*cluster, *store, 0, "wf", slot_master);
  const std::string s = KeyOnMaster(*cluster, *store, 1, "ws", slot_master);
  const std::string b = KeyOnMaster(*cluster, *store, 2, "wb", slot_master);
  const int64_t year = int64_t{366} * 24 * 3600 * 1'000'000'000;
  const Limit fixed = WindowLimit(Algorithm::kFixedWindow, 4, year);
  const Limit sliding = WindowLimit(Algorithm::kSlidingWindow, 3, year);
  const Limit bucket = Bucket(0.001, 5);
  ASSERT_TRUE(AcquireOne(*store, s, sliding, 2).value().allowed);
  const uint64_t cross_before = store->Stats().cross_node_batches;
  AcquireItem denied[] = {{f, &fixed, 3}, {b, &bucket, 2}, {s, &sliding, 2}};
  auto r = store->Acquire(denied);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->allowed);
  EXPECT_EQ(r->denied_index, 2);
  EXPECT_EQ(r->decisions[0].remaining, 4);  // would fit; uncharged state
  EXPECT_EQ(r->decisions[2].remaining, 1);
  EXPECT_EQ(AcquireOne(*store, f, fixed, 0).value().remaining, 4);
  EXPECT_EQ(AcquireOne(*store, b, bucket, 0).value().remaining, 5);
  AcquireItem fits[] = {{f, &fixed, 3}, {b, &bucket, 2}, {s, &sliding, 1}};
  auto ok = store->Acquire(fits);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->allowed);
  EXPECT_EQ(ok->decisions[0].remaining, 1);
  EXPECT_EQ(ok->decisions[1].remaining, 3);
  EXPECT_EQ(ok->decisions[2].remaining, 0);
  EXPECT_EQ(AcquireOne(*store, f, fixed, 0).value().remaining, 1);
  EXPECT_EQ(AcquireOne(*store, s, sliding, 0).value().remaining, 0);
  EXPECT_GE(store->Stats().cross_node_batches, cross_before + 2);
}

// A store on `cluster` that takes its time from `clock` (client clock mode),
// its keys under `prefix`; null (and a test failure) if it cannot start.
std::unique_ptr<RedisClusterStore> MakeClientClockStore(const RedisCluster& cluster,
                                                        ManualClock& clock,
                                                        const std::string& prefix) {
  auto o = ParseRedisClusterUrl(cluster.url());
  EXPECT_TRUE(o.ok());
  if (!o.ok()) return nullptr;
  o->node.use_client_clock = true;
  o->node.clock = &clock;
  o->node.call_timeout = Scaled(2s);
  o->node.key_prefix = prefix;
  auto store = RedisClusterStore::Create(*o);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return nullptr;
  EXPECT_TRUE(WaitHealthy(**store));
  return std::move(*store);
}

// The cluster script decides windows exactly like LocalStore, with batches
// whose keys span masters (dry runs) and slots of one master.
TEST(RedisClusterStore, WindowsAgreeWithLocalStoreDecisionForDecision) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  for (bool backwards : {false, true}) {
    ManualClock clock(kStartNs, kWallOffsetNs);
    auto store = MakeClientClockStore(*cluster, clock, backwards ? "agree-b:" : "agree-f:");
    ASSERT_NE(store, nullptr);
    LocalStoreOptions lo;
    lo.clock = &clock;
    auto local = LocalStore::Create(lo);
    ASSERT_TRUE(local.ok());
    ExpectWindowsAgreeWithLocal(*store, **local, clock, backwards ? 4242 : 2424, 800, backwards);
  }
}

// Issue 17's counts per period on the cluster, to the nanosecond, on the
// client clock (tests/period_cases.h); the keys spread over the masters.
TEST(RedisClusterStore, CountsPerPeriodAreExactToTheNanosecond) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  ManualClock clock(kStartNs, kWallOffsetNs);
  auto store = MakeClientClockStore(*cluster, clock, "periods:");
  ASSERT_NE(store, nullptr);
  ExpectPeriodsExactOnStore(*store, clock, "period:");
  ExpectQuotasExactOnStore(*store, clock, "quota:");
  ExpectCalendarQuotasOnStore(*store, clock, "calendar:");
}

TEST(RedisClusterStore, BatchOverTwoSlotsOfOneMasterIsOneAtomicCall) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store = MakeClusterStore(cluster->url());
  ASSERT_NE(store, nullptr);
  std::map<int, int> slot_master;
  std::vector<std::string> found;  // two identities on master 1, in different slots
  int first_slot = -1;
  for (int i = 0; i < 100000 && found.size() < 2; ++i) {
    const std::string key = "s\x1ftoken_bucket\x1fsid-" + std::to_string(i);
    const int slot = RedisClusterStore::SlotOf(store->RedisKeyFor(key));
    if (slot == first_slot) continue;
    auto it = slot_master.find(slot);
    if (it == slot_master.end()) it = slot_master.emplace(slot, cluster->MasterOfSlot(slot)).first;
    if (it->second != 1) continue;
    found.push_back(key);
    first_slot = slot;
  }
  ASSERT_EQ(found.size(), 2u);
  const std::string a = found[0], b = found[1];
  ASSERT_FALSE(b.empty());
  const Limit l = Bucket(0.001, 2);
  AcquireItem items[] = {{a, &l, 1}, {b, &l, 2}};
  const uint64_t cross_before = store->Stats().cross_node_batches;
  auto r = store->Acquire(items);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->allowed);
  auto again = store->Acquire(items);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->allowed);
  EXPECT_EQ(again->denied_index, 1);
  EXPECT_EQ(AcquireOne(*store, a, l, 0).value().remaining, 1);  // not charged twice
  EXPECT_EQ(store->Stats().cross_node_batches, cross_before);   // one node, one script
}

TEST(RedisClusterStore, DiscoversTheClusterFromOneSeed) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store =
      MakeClusterStore("redis-cluster://127.0.0.1:" + std::to_string(cluster->node(2).port()));
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Healthy());
  EXPECT_EQ(store->Stats().masters, 3u);
  const Limit l = Bucket(0.001, 3);
  EXPECT_TRUE(AcquireOne(*store, "one-seed", l, 1).value().allowed);
}

// Moves `slot` from master `from` to master `to` the way redis-cli --cluster
// reshard does, in steps the test can interleave with load.
struct SlotMigration {
  RedisCluster& c;
  int slot;
  size_t from, to;
  std::string from_id{}, to_id{};  // set by Begin(); {}: SlotMigration{...} leaves them out
  void Begin() {
    from_id = c.NodeId(from);
    to_id = c.NodeId(to);
    ASSERT_EQ(
        c.node(to).Command({"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", from_id}),
        "OK");
    ASSERT_EQ(
        c.node(from).Command({"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", to_id}),
        "OK");
  }
  void MoveKeys() {
    for (;;) {
      const std::string keys =
          c.node(from).Command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
      if (keys.empty()) return;
      std::vector<std::string> argv = {
          "MIGRATE", "127.0.0.1", std::to_string(c.node(to).port()), "", "0", "5000", "KEYS"};
      size_t start = 0;
      while (start <= keys.size()) {
        size_t end = keys.find('\n', start);
        if (end == std::string::npos) end = keys.size();
        if (end > start) argv.push_back(keys.substr(start, end - start));
        start = end + 1;
      }
      const std::string r = c.node(from).Command(argv);
      ASSERT_TRUE(r == "OK" || r == "NOKEY") << r;
    }
  }
  // Sets the new owner on every master (in index order).
  void Finish() {
    for (size_t i = 0; i < c.size(); ++i) {
      c.node(i).Command({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id});
    }
  }
  // The unlucky order some resharding tools take (redis-cli sets the target
  // first): the source learns the new owner before the target does.
  // Meanwhile the source answers MOVED to the target and the target, still
  // importing, MOVED back: a client must wait that out, not give up after
  // max_redirects round trips of a few microseconds each. The bounce is held
  // until `store`'s clients have waited through it `waits` times.
  void FinishSourceFirst(RedisClusterStore& store, uint64_t waits) {
    const std::string slot_text = std::to_string(slot);
    const uint64_t target = store.Stats().tryagain + waits;
    ASSERT_EQ(c.node(from).Command({"CLUSTER", "SETSLOT", slot_text, "NODE", to_id}), "OK");
    EXPECT_TRUE(WaitFor([&] { return store.Stats().tryagain >= target; }, 10s, 1ms))
        << "the clients never waited through the MOVED bounce";
    for (size_t i = 0; i < c.size(); ++i) {
      if (i != from) c.node(i).Command({"CLUSTER", "SETSLOT", slot_text, "NODE", to_id});
    }
  }
};

// A batch over two slots of one master meets a migration of one of them
// (new keys: Redis refuses the multi-slot call, and the batch cannot be sent
// with declared keys). It waits and retries instead of failing; once the
// migration is cancelled it is decided, exactly once.
TEST(RedisClusterStore, MultiSlotBatchRetriesThroughAMigration) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store = MakeClusterStore(cluster->url(), 3000ms);
  ASSERT_NE(store, nullptr);
  std::map<int, int> slot_master;
  const std::string k1 = KeyOnMaster(*cluster, *store, 0, "mig-a", slot_master);
  std::string k2;
  const int s1 = RedisClusterStore::SlotOf(store->RedisKeyFor(k1));
  for (int i = 0; i < 100000 && k2.empty(); ++i) {
    const std::string k = "mig-b\x1ftoken_bucket\x1fother-" + std::to_string(i);
    const int slot = RedisClusterStore::SlotOf(store->RedisKeyFor(k));
    if (slot != s1 && cluster->MasterOfSlot(slot) == 0) k2 = k;
  }
  ASSERT_FALSE(k1.empty() || k2.empty());
  SlotMigration m{*cluster, s1, 0, 1, "", ""};
  m.Begin();
  const uint64_t fallbacks = store->Stats().slot_fallbacks;
  const uint64_t tryagain = store->Stats().tryagain;
  const Limit l = Bucket(0.001, 3);
  std::promise<Result<BatchDecision>> got;
  AcquireItem items[] = {{k1, &l, 1}, {k2, &l, 1}};
  store->AcquireAsync(items, [&](Result<BatchDecision> r) { got.set_value(std::move(r)); });
  // Wait (bounded) until the batch was refused and parked, then cancel.
  const bool parked = WaitFor(
      [&] {
        return store->Stats().slot_fallbacks > fallbacks && store->Stats().tryagain > tryagain;
      },
      2s, 1ms);
  for (size_t n : {size_t{0}, size_t{1}}) {
    EXPECT_EQ(cluster->node(n).Command({"CLUSTER", "SETSLOT", std::to_string(s1), "STABLE"}), "OK");
  }
  auto r = got.get_future().get();
  EXPECT_TRUE(parked);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(AcquireOne(*store, k1, l, 0).value().remaining, 2);  // charged once
  EXPECT_EQ(AcquireOne(*store, k2, l, 0).value().remaining, 2);
}

// A batch over two slots of one master whose first slot a finished
// resharding moved to another master (the store has not seen it yet): the
// call is refused, and once the map shows the slots on different masters the
// batch goes through the cross-master path: a decision, not an error, and
// each key charged once.
TEST(RedisClusterStore, MultiSlotBatchSplitByAReshardingIsReroutedAcrossMasters) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store = MakeClusterStore(cluster->url());
  ASSERT_NE(store, nullptr);
  std::map<int, int> slot_master;
  const std::string k1 = KeyOnMaster(*cluster, *store, 0, "split-a", slot_master);
  std::string k2;
  const int s1 = RedisClusterStore::SlotOf(store->RedisKeyFor(k1));
  for (int i = 0; i < 100000 && k2.empty(); ++i) {
    const std::string k = "split-b\x1ftoken_bucket\x1fother-" + std::to_string(i);
    const int slot = RedisClusterStore::SlotOf(store->RedisKeyFor(k));
    if (slot != s1 && cluster->MasterOfSlot(slot) == 0) k2 = k;
  }
  ASSERT_FALSE(k1.empty() || k2.empty());
  const Limit l = Bucket(0.001, 3);
  EXPECT_TRUE(AcquireOne(*store, k1, l, 0).value().allowed);  // the store has its map
  SlotMigration there{*cluster, s1, 0, 2, "", ""};
  there.Begin();
  there.MoveKeys();
  there.Finish();
  const uint64_t cross = store->Stats().cross_node_batches;
  AcquireItem items[] = {{k1, &l, 1}, {k2, &l, 1}};
  auto r = store->Acquire(items);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(store->Stats().cross_node_batches, cross + 1);
  EXPECT_EQ(AcquireOne(*store, k1, l, 0).value().remaining, 2);  // charged once
  EXPECT_EQ(AcquireOne(*store, k2, l, 0).value().remaining, 2);
  SlotMigration back{*cluster, s1, 2, 0, "", ""};  // leave the shared cluster as it was
  back.Begin();
  back.MoveKeys();
  back.Finish();
  EXPECT_EQ(cluster->MasterOfSlot(s1), 0);
}

// 16 threads charge ten buckets of one slot while it moves to another master,
// finished in the order that makes MOVED bounce between two masters: no call
// fails, no token is granted twice or lost.
TEST(RedisClusterStore, SlotMigrationUnderLoadIsInvisibleAndExact) {
  auto start = RedisCluster::Start(RedisCluster::Options{});  // its own cluster: it reshards
  if (start.missing) GTEST_SKIP() << start.error;
  ASSERT_TRUE(start.cluster) << start.error;
  RedisCluster& cluster = *start.cluster;
  auto store = MakeClusterStore(cluster.url());
  ASSERT_NE(store, nullptr);

  // Ten buckets of one identity (one slot), burst 300 each, no refill during the test.
  const std::string id = "\x1ftoken_bucket\x1fmigrating-user";
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back("rule" + std::to_string(i) + id);
  const int slot = RedisClusterStore::SlotOf(store->RedisKeyFor(keys[0]));
  const int from = cluster.MasterOfSlot(slot);
  ASSERT_GE(from, 0);
  const size_t to = static_cast<size_t>((from + 1) % 3);
  const Limit l = Bucket(0.001, 300);
  // Half of the buckets exist before the migration starts.
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(AcquireOne(*store, keys[static_cast<size_t>(i)], l, 1)->allowed);

  std::atomic<bool> stop{false};
  std::vector<std::atomic<int>> allowed(keys.size());
  for (int i = 0; i < 5; ++i) allowed[static_cast<size_t>(i)] = 1;
  std::atomic<int> errors{0};
  std::mutex mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      size_t k = static_cast<size_t>(t) % keys.size();
      while (!stop.load()) {
        auto r = AcquireOne(*store, keys[k], l, 1);
        if (!r.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (errors.fetch_add(1) == 0) first_error = r.status().ToString();
        } else if (r->allowed) {
          allowed[k].fetch_add(1);
        }
        k = (k + 1) % keys.size();
      }
    });
  }
  auto wait_calls = [&](uint64_t n) {
    const uint64_t target = store->Stats().script_calls + n;
    WaitFor([&] { return store->Stats().script_calls >= target; }, 10s, 1ms);
  };
  SlotMigration m{cluster, slot, static_cast<size_t>(from), to};
  wait_calls(50);
  m.Begin();
  wait_calls(200);  // load while MIGRATING: new keys get ASK
  m.MoveKeys();
  wait_calls(200);                  // all keys on the target: everything ASKs
  m.FinishSourceFirst(*store, 32);  // MOVED bounces until the clients waited 32 times
  wait_calls(200);                  // the slot is the target's: MOVED, then the new map
  stop.store(true);
  for (auto& th : threads) th.join();

  EXPECT_EQ(errors.load(), 0) << first_error;
  const auto stats = store->Stats();
  EXPECT_GE(stats.ask, 1u);
  EXPECT_GE(stats.moved, 1u);
  // Exact: keep going until every bucket is empty, then count.
  for (size_t k = 0; k < keys.size(); ++k) {
    for (int i = 0; i < 400; ++i) {
      auto r = AcquireOne(*store, keys[k], l, 1);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (!r->allowed) break;
      allowed[k].fetch_add(1);
    }
    EXPECT_EQ(allowed[k].load(), 300) << "bucket " << k;
  }
  EXPECT_EQ(cluster.MasterOfSlot(slot), static_cast<int>(to));
}

// Command(key, argv) goes to the master of key's slot and follows ASK (a slot
// migrating away: the new key is written on the importing node after ASKING)
// and MOVED (the migration finished behind the store's back) inside the
// store. The slot is moved back at the end, so the shared cluster is as before.
TEST(RedisClusterStore, CommandIsRoutedBySlotAndFollowsAskAndMoved) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto o = ParseRedisClusterUrl(cluster->url());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  o->node.call_timeout = Scaled(std::chrono::milliseconds(2000));
  o->periodic_refresh = std::chrono::hours(1);  // only MOVED updates its map here
  auto created = RedisClusterStore::Create(*o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<RedisClusterStore> store = std::move(*created);
  ASSERT_TRUE(WaitHealthy(*store));
  std::string key;
  int slot = -1;
  for (int i = 0; i < 100000 && key.empty(); ++i) {
    const std::string k = "tg-command:{c" + std::to_string(i) + "}";
    if (cluster->MasterOfSlot(RedisClusterStore::SlotOf(k)) == 0) {
      key = k;
      slot = RedisClusterStore::SlotOf(k);
    }
  }
  ASSERT_FALSE(key.empty());
  auto reply = [&](std::vector<std::string> argv) {
    Result<RedisReply> r = store->Command(key, std::move(argv));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->str : std::string("<failed>");
  };
  EXPECT_EQ(reply({"SET", key, "on-master-0", "PX", "60000"}), "OK");
  EXPECT_EQ(cluster->node(0).Command({"GET", key}), "on-master-0");
  ASSERT_EQ(reply({"DEL", key}), "");  // an integer reply: no text
  const uint64_t ask = store->Stats().ask, moved = store->Stats().moved;

  SlotMigration m{*cluster, slot, 0, 1};
  m.Begin();  // the key is gone from master 0: it answers ASK for it
  EXPECT_EQ(reply({"SET", key, "asked", "PX", "60000"}), "OK");
  EXPECT_GT(store->Stats().ask, ask);
  m.MoveKeys();
  m.Finish();  // master 1 owns the slot; the store still sends to master 0: MOVED
  EXPECT_EQ(reply({"GET", key}), "asked");
  EXPECT_GT(store->Stats().moved, moved);
  EXPECT_EQ(cluster->node(1).Command({"GET", key}), "asked");
  // An error reply that is no redirection is a value, not a failed call.
  Result<RedisReply> wrong = store->Command(key, {"INCR", key});
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  EXPECT_EQ(wrong->type, RedisReply::Type::kError);

  SlotMigration back{*cluster, slot, 1, 0};
  back.Begin();
  back.MoveKeys();
  back.Finish();
  EXPECT_EQ(cluster->MasterOfSlot(slot), 0);
}

// The fleet's rollback guards on a cluster: two instances, each with its own
// cluster store, share a trip and a clear through the hash's one slot (the
// publish script and every HSCAN page routed by the hash's key).
TEST(RedisClusterStore, RollbackFleetSharesTripsThroughTheHashsSlot) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  const std::string key = "tg-fleet:{rollback}";
  struct Instance {
    std::unique_ptr<RedisClusterStore> store;
    std::vector<RollbackRecord> adopted;
    std::unique_ptr<RollbackFleet> fleet;
  };
  auto make = [&](Instance& in, const std::string& id) {
    in.store = MakeClusterStore(cluster->url());
    ASSERT_NE(in.store, nullptr);
    RollbackFleetOptions o;
    o.key = key;
    o.instance_id = id;
    auto f = RollbackFleet::Create(
        o,
        [s = in.store.get(), key](std::vector<std::string> argv) {
          return s->Command(key, std::move(argv));
        },
        [&in](const RollbackRecord& r) { in.adopted.push_back(r); });
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    in.fleet = std::move(*f);
  };
  Instance a, b;
  make(a, "host-a");
  make(b, "host-b");
  ASSERT_TRUE(a.fleet && b.fleet);
  RollbackChange trip{"api", 0x42, true, "upstream_errors", "5xx rose"};
  auto stored = a.fleet->PublishNow(trip);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_TRUE(b.fleet->Sync().ok());
  ASSERT_EQ(b.adopted.size(), 1u);
  EXPECT_EQ(b.adopted[0].origin, "host-a");
  EXPECT_EQ(b.adopted[0].trigger, "upstream_errors");
  ASSERT_TRUE(b.fleet->PublishNow({"api", 0x42, false, "admin", ""}).ok());
  ASSERT_TRUE(a.fleet->Sync().ok());
  ASSERT_EQ(a.adopted.size(), 2u);  // its own trip, then B's clear
  EXPECT_FALSE(a.adopted[1].tripped);
  // The hash lives on the master that owns its slot.
  const int master = cluster->MasterOfSlot(RedisClusterStore::SlotOf(key));
  ASSERT_GE(master, 0);
  EXPECT_NE(cluster->node(master).Command({"HGET", key, "api"}).find(" cleared "),
            std::string::npos);
  (void)cluster->node(master).Command({"DEL", key});
}

// Concurrency leases on every master: exact across two stores, the lease set
// on the master that owns the key's hash tag (so beside the identity's
// buckets), released through the same routing.
TEST(RedisClusterStore, LeasesAreExactOnEveryMaster) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto a = MakeClusterStore(cluster->url()), b = MakeClusterStore(cluster->url());
  ASSERT_TRUE(a && b);
  const LeaseLimit limit = *LeaseLimit::Create(3, Nanos(60'000'000'000));
  std::map<int, int> slot_master;
  for (int m = 0; m < 3; ++m) {
    const std::string key = KeyOnMaster(*cluster, *a, m, "lease" + std::to_string(m), slot_master);
    ASSERT_FALSE(key.empty());
    const std::string lease_key = a->RedisKeyFor(key) + "|cc";
    EXPECT_EQ(cluster->MasterOfSlot(RedisClusterStore::SlotOf(lease_key)), m);
    ExpectNeverMoreThanMaxInFlight({a.get(), b.get()}, key, limit, 3, 60);
    EXPECT_EQ(cluster->node(m).Command({"ZCARD", lease_key}), "3");
  }
}

// Issue 29: 1,000 own leases tell nothing about the next id (the cluster store
// drew them from std::mt19937_64 too), and releasing every id derived from
// them frees no one else's lease.
TEST(RedisClusterStore, LeaseIdsAreUnpredictableFromAThousandOwnLeases) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto store = MakeClusterStore(cluster->url());
  ASSERT_NE(store, nullptr);
  ExpectForgedReleasesFreeNothing(*store, "unpredictable", 1000);
}

// The async lease path directly (what tollgated and the Enforcer's RunAsync
// use): calls in flight at once on each master through two stores, exactly
// max_in_flight granted; then a lease set whose slot moved to another master
// behind the store's back: the async release follows MOVED and frees the
// slot, an async acquire after it is routed to the new master. The slot is
// moved back at the end.
TEST(RedisClusterStore, AsyncLeasesAreExactOnEveryMasterAndFollowMoved) {
  RedisCluster* cluster = SharedCluster();
  ASSERT_NE(cluster, nullptr);
  auto a = MakeClusterStore(cluster->url()), b = MakeClusterStore(cluster->url());
  ASSERT_TRUE(a && b);
  const LeaseLimit limit = *LeaseLimit::Create(4, Nanos(60'000'000'000));
  std::map<int, int> slot_master;
  for (int m = 0; m < 3; ++m) {
    const std::string key =
        KeyOnMaster(*cluster, *a, m, "async-lease" + std::to_string(m), slot_master);
    ASSERT_FALSE(key.empty());
    ExpectAsyncAcquiresGrantExactly({a.get(), b.get()}, key, limit, 12);
  }

  const std::string key = KeyOnMaster(*cluster, *a, 0, "moved-lease", slot_master);
  ASSERT_FALSE(key.empty());
  const std::string lease_key = a->RedisKeyFor(key) + "|cc";
  const int slot = RedisClusterStore::SlotOf(lease_key);
  auto acquire = [&](RedisClusterStore& store) {
    auto done = std::make_shared<base::OneShot<Result<LeaseDecision>>>();
    store.AcquireLeaseAsync(key, limit, [done](Result<LeaseDecision> d) { done->Set(d); });
    return done->Wait();
  };
  auto release = [&](RedisClusterStore& store, const std::string& id) {
    auto done = std::make_shared<base::OneShot<Result<bool>>>();
    store.ReleaseLeaseAsync(key, id, [done](Result<bool> r) { done->Set(r); });
    return done->Wait();
  };
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    auto d = acquire(*a);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    ASSERT_TRUE(d->allowed);
    ids.push_back(d->lease_id);
  }
  SlotMigration there{*cluster, slot, 0, 1};
  there.Begin();
  there.MoveKeys();
  there.Finish();  // a still sends the slot to master 0: MOVED
  ASSERT_EQ(cluster->node(1).Command({"ZCARD", lease_key}), "4");
  const uint64_t moved = a->Stats().moved;
  auto r = release(*a, ids[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r) << "the release did not reach the lease on the new master";
  EXPECT_GT(a->Stats().moved, moved);
  EXPECT_EQ(cluster->node(1).Command({"ZCARD", lease_key}), "3");
  auto again = acquire(*a);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->allowed) << "the freed slot on the new master";
  auto over = acquire(*b);
  ASSERT_TRUE(over.ok()) << over.status().ToString();
  EXPECT_FALSE(over->allowed) << "max_in_flight holds after the move";
  ids[0] = again->lease_id;
  for (const std::string& id : ids) EXPECT_TRUE(*release(*b, id));

  SlotMigration back{*cluster, slot, 1, 0};
  back.Begin();
  back.MoveKeys();
  back.Finish();
  EXPECT_EQ(cluster->MasterOfSlot(slot), 0);
}

}  // namespace
}  // namespace tollgate::testing
