// Slot math, topology parsing and the cluster key layout (no servers).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis/cluster_slots.h"
#include "redis/redis_keys.h"
#include "tollgate/redis_cluster_store.h"

namespace tollgate::redis {
namespace {

TEST(ClusterSlots, Crc16AndKeySlotMatchRedis) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // CRC16-XMODEM check value
  EXPECT_EQ(KeySlot("foo"), 12182);       // values from the Redis documentation
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("{user1000}.followers"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), KeySlot("foo{}{bar}"));  // empty tag: whole key hashed
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
}

// RESP2 text, parsed by hiredis' own reader into the reply the parsers see.
std::string Arr(size_t n) { return "*" + std::to_string(n) + "\r\n"; }
std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}
std::string Int(int64_t v) { return ":" + std::to_string(v) + "\r\n"; }

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Reply ParseResp(const std::string& resp) {
  redisReader* reader = redisReaderCreate();
  void* out = nullptr;
  const bool ok = redisReaderFeed(reader, resp.data(), resp.size()) == REDIS_OK &&
                  redisReaderGetReply(reader, &out) == REDIS_OK && out != nullptr;
  redisReaderFree(reader);
  EXPECT_TRUE(ok) << resp;
  return Reply(static_cast<redisReply*>(out));
}

// One CLUSTER SLOTS range: lo, hi, master [host, port, id], replicas.
std::string SlotsRange(int lo, int hi, const std::string& host, int port,
                       std::vector<std::pair<std::string, int>> replicas = {}) {
  std::string r = Arr(3 + replicas.size()) + Int(lo) + Int(hi);
  r += Arr(3) + Bulk(host) + Int(port) + Bulk("id" + std::to_string(port));
  for (const auto& [h, p] : replicas)
    r += Arr(3) + Bulk(h) + Int(p) + Bulk("r" + std::to_string(p));
  return r;
}

TEST(ClusterSlots, ParsesClusterSlots) {
  // Master A owns two ranges (one reply entry each); B has a replica; C's
  // host is "" (a node that does not know its address); slots 12000-12099
  // belong to nobody.
  const std::string resp = Arr(4) + SlotsRange(0, 5460, "10.0.0.1", 7000) +
                           SlotsRange(5461, 10922, "10.0.0.2", 7001, {{"10.0.0.5", 7004}}) +
                           SlotsRange(10923, 11999, "10.0.0.1", 7000) +
                           SlotsRange(12100, 16383, "", 7002, {{"", 7005}});
  Reply r = ParseResp(resp);
  auto map = ParseClusterSlots(r.get(), "seed.host");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->masters,
            (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001", "seed.host:7002"}));
  EXPECT_EQ(map->replicas[0], std::vector<std::string>{});
  EXPECT_EQ(map->replicas[1], std::vector<std::string>{"10.0.0.5:7004"});
  EXPECT_EQ(map->replicas[2], std::vector<std::string>{"seed.host:7005"});
  EXPECT_EQ(map->owner[0], 0);
  EXPECT_EQ(map->owner[5460], 0);
  EXPECT_EQ(map->owner[5461], 1);
  EXPECT_EQ(map->owner[10922], 1);
  EXPECT_EQ(map->owner[10923], 0);
  EXPECT_EQ(map->owner[11999], 0);
  EXPECT_EQ(map->owner[12000], -1);
  EXPECT_EQ(map->owner[12099], -1);
  EXPECT_EQ(map->owner[12100], 2);
  EXPECT_EQ(map->owner[kClusterSlots - 1], 2);
  EXPECT_EQ(map->covered(), kClusterSlots - 100);

  // A malformed entry refuses the whole reply, naming it; a non-array is an error.
  Reply odd =
      ParseResp(Arr(3) + Arr(2) + Int(0) + Int(5) + Bulk("junk") + SlotsRange(7, 9, "h", 1));
  auto refused = ParseClusterSlots(odd.get());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "CLUSTER SLOTS: range 0: not [start, end, master, replicas...] (reply ignored)");
  Reply err = ParseResp("-ERR This instance has cluster support disabled\r\n");
  EXPECT_FALSE(ParseClusterSlots(err.get()).ok());
  EXPECT_FALSE(ParseClusterSlots(nullptr).ok());
}

// Issue 15: a range [0, INT64_MAX] spun the cluster I/O thread forever (the
// slot loop ran to the reply's end value); a negative start, a reversed range,
// a range past the last slot, a slot or port of the wrong type, a port out of
// range or an unusable host: each refuses the reply, saying where and why.
TEST(ClusterSlots, HostileSlotRangesAndNodesAreRefusedNotTrusted) {
  const struct {
    std::string resp;
    std::string why;
  } cases[] = {
      {Arr(1) + Arr(3) + Int(0) + Int(INT64_MAX) + Arr(2) + Bulk("h") + Int(1),
       "range 0: slot range 0-9223372036854775807 is not within 0-16383"},
      {Arr(1) + SlotsRange(-5, 10, "h", 1), "range 0: slot range -5-10 is not within 0-16383"},
      {Arr(1) + SlotsRange(10, 9, "h", 1), "range 0: slot range 10-9 is not within 0-16383"},
      {Arr(1) + SlotsRange(12100, 20000, "h", 1),
       "range 0: slot range 12100-20000 is not within 0-16383"},
      {Arr(1) + Arr(3) + Bulk("0") + Int(5) + Arr(2) + Bulk("h") + Int(1),
       "range 0: slot range is not two integers"},
      {Arr(1) + Arr(3) + Int(0) + Int(5) + Arr(2) + Bulk("h") + Bulk("7000"),
       "range 0 master: port is not an integer in 1-65535"},
      {Arr(1) + SlotsRange(0, 5, "h", 70000), "range 0 master: port is not an integer in 1-65535"},
      {Arr(1) + SlotsRange(0, 5, "h", 1, {{"bad host", 2}}),
       "range 0 replica 0: host is not a host name or address"},
      {Arr(1) + SlotsRange(0, 5, std::string(300, 'h'), 1),
       "range 0 master: host is not a host name or address"},
  };
  for (const auto& c : cases) {
    Reply r = ParseResp(c.resp);
    auto map = ParseClusterSlots(r.get(), "seed.host");
    ASSERT_FALSE(map.ok()) << c.why;
    EXPECT_EQ(map.status().message(), "CLUSTER SLOTS: " + c.why + " (reply ignored)");
  }
  // More ranges than slots is not a topology (each range owns at least one).
  std::string many = Arr(kClusterSlots + 1);
  for (int i = 0; i <= kClusterSlots; ++i) many += SlotsRange(0, 0, "h", 1);
  Reply r = ParseResp(many);
  EXPECT_FALSE(ParseClusterSlots(r.get()).ok());
}

struct ShardNode {
  std::string ip, endpoint;
  int port;
  std::string role, health;
};

std::string Shard(std::vector<int> slots, const std::vector<ShardNode>& nodes) {
  std::string r = Arr(4) + Bulk("slots") + Arr(slots.size());
  for (int s : slots) r += Int(s);
  r += Bulk("nodes") + Arr(nodes.size());
  for (const auto& n : nodes) {
    r += Arr(16) + Bulk("id") + Bulk("id" + std::to_string(n.port)) + Bulk("port") + Int(n.port) +
         Bulk("ip") + Bulk(n.ip) + Bulk("endpoint") + Bulk(n.endpoint) + Bulk("role") +
         Bulk(n.role) + Bulk("replication-offset") + Int(42) + Bulk("health") + Bulk(n.health) +
         Bulk("hostname") + Bulk("");
  }
  return r;
}

TEST(ClusterSlots, ParsesClusterShards) {
  const std::string resp =
      Arr(4) +
      // Two slot ranges in one shard; an online replica and a loading one.
      Shard({0, 99, 200, 299}, {{"10.0.0.1", "10.0.0.1", 7000, "master", "online"},
                                {"10.0.0.4", "10.0.0.4", 7003, "replica", "online"},
                                {"10.0.0.7", "10.0.0.7", 7006, "replica", "loading"}}) +
      // The replica listed first; the master's ip is empty: its endpoint is used.
      Shard({100, 199}, {{"10.0.0.5", "10.0.0.5", 7004, "replica", "online"},
                         {"", "node-b.example", 7001, "master", "online"}}) +
      // A failed master: the shard's slots stay unassigned until a failover.
      Shard({300, 399}, {{"10.0.0.3", "10.0.0.3", 7002, "master", "fail"}}) +
      // No address at all: the host the reply came from.
      Shard({400, 16383}, {{"", "", 7009, "master", "online"}});
  Reply r = ParseResp(resp);
  auto map = ParseClusterShards(r.get(), "seed.host");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->masters,
            (std::vector<std::string>{"10.0.0.1:7000", "node-b.example:7001", "seed.host:7009"}));
  EXPECT_EQ(map->replicas[0], std::vector<std::string>{"10.0.0.4:7003"});
  EXPECT_EQ(map->replicas[1], std::vector<std::string>{"10.0.0.5:7004"});
  EXPECT_TRUE(map->replicas[2].empty());
  EXPECT_EQ(map->owner[0], 0);
  EXPECT_EQ(map->owner[99], 0);
  EXPECT_EQ(map->owner[100], 1);
  EXPECT_EQ(map->owner[199], 1);
  EXPECT_EQ(map->owner[200], 0);
  EXPECT_EQ(map->owner[299], 0);
  EXPECT_EQ(map->owner[300], -1);
  EXPECT_EQ(map->owner[399], -1);
  EXPECT_EQ(map->owner[400], 2);
  EXPECT_EQ(map->owner[kClusterSlots - 1], 2);
  EXPECT_EQ(map->covered(), kClusterSlots - 100);

  Reply err = ParseResp("-ERR unknown subcommand 'SHARDS'\r\n");
  EXPECT_FALSE(ParseClusterShards(err.get()).ok());
  Reply empty = ParseResp(Arr(0));
  auto none = ParseClusterShards(empty.get());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->covered(), 0);
}

TEST(ClusterSlots, HostileShardsAreRefusedNotTrusted) {
  const ShardNode master{"10.0.0.1", "10.0.0.1", 7000, "master", "online"};
  const std::string cases[] = {
      Arr(1) + Shard({0, INT32_MAX}, {master}),
      Arr(1) + Shard({-1, 5}, {master}),
      Arr(1) + Shard({9, 5}, {master}),
      Arr(1) + Shard({0}, {master}),  // not pairs
      Arr(1) + Shard({0, 5}, {{"10.0.0.1", "", 0, "master", "online"}}),
      Arr(1) + Bulk("shard"),
  };
  for (const auto& resp : cases) {
    Reply r = ParseResp(resp);
    auto map = ParseClusterShards(r.get(), "seed.host");
    EXPECT_FALSE(map.ok()) << resp;
  }
  // [0, INT64_MAX] in a shard without a master: refused before anything else.
  Reply r = ParseResp(Arr(1) + Arr(4) + Bulk("slots") + Arr(2) + Int(0) + Int(INT64_MAX) +
                      Bulk("nodes") + Arr(0));
  auto map = ParseClusterShards(r.get());
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.status().message(),
            "CLUSTER SHARDS: shard 0: slot range 0-9223372036854775807 is not within 0-16383 "
            "(reply ignored)");
}

TEST(ClusterSlots, ClassifiesRetryableErrors) {
  for (const char* e : {"TRYAGAIN Multiple keys request during rehashing of slot",
                        "CLUSTERDOWN The cluster is down", "CLUSTERDOWN Hash slot not served",
                        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set "
                        "to 'no'.",
                        "LOADING Redis is loading the dataset in memory",
                        "READONLY You can't write against a read only replica."}) {
    EXPECT_TRUE(RetryableClusterError(e)) << e;
  }
  for (const char* e :
       {"MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381",
        "CROSSSLOT Keys in request don't hash to the same slot", "NOSCRIPT No matching script",
        "ERR Error running script", "WRONGPASS", "OOM command not allowed", "", "tryagain"}) {
    EXPECT_FALSE(RetryableClusterError(e)) << e;
  }
}

TEST(ClusterSlots, ParsesRedirections) {
  int slot = 0;
  std::string ep;
  ASSERT_TRUE(ParseRedirect("MOVED 3999 127.0.0.1:6381", "MOVED", &slot, &ep));
  EXPECT_EQ(slot, 3999);
  EXPECT_EQ(ep, "127.0.0.1:6381");
  ASSERT_TRUE(ParseRedirect("ASK 1 10.0.0.1:7000", "ASK", &slot, &ep));
  EXPECT_EQ(slot, 1);
  EXPECT_FALSE(ParseRedirect("MOVED 99999 h:1", "MOVED", &slot, &ep));
  EXPECT_FALSE(ParseRedirect("ASKING", "ASK", &slot, &ep));
  EXPECT_FALSE(ParseRedirect("ERR x", "MOVED", &slot, &ep));
  ASSERT_TRUE(ParseRedirect("MOVED 7 2001:db8::1:7000\r\n", "MOVED", &slot, &ep));
  EXPECT_EQ(ep, "2001:db8::1:7000");
  // The endpoint must be host:port with a usable host and a port in 1-65535.
  for (const char* bad : {"MOVED 7 h", "MOVED 7 :7000", "MOVED 7 h:0", "MOVED 7 h:65536",
                          "MOVED 7 h:70x", "MOVED 7 h h:1", "MOVED 7x h:1", "MOVED -1 h:1"}) {
    EXPECT_FALSE(ParseRedirect(bad, "MOVED", &slot, &ep)) << bad;
  }
}

TEST(ClusterKeys, OneIdentityOneSlotAndNoUntrustedTags) {
  const std::string a = ClusterRedisKey("tg:", std::string("free\x1ftoken_bucket\x1fuser-1"));
  const std::string b = ClusterRedisKey("tg:", std::string("pro\x1ftoken_bucket\x1fuser-1"));
  const std::string c = ClusterRedisKey("tg:", std::string("free\x1ftoken_bucket\x1fuser-2"));
  EXPECT_EQ(KeySlot(a), KeySlot(b));
  EXPECT_NE(a, b);
  EXPECT_NE(KeySlot(a), KeySlot(c));  // (true for these two; tags spread identities)
  const std::string hostile = ClusterRedisKey("tg:",
                                              "r\x1f"
                                              "a\x1f"
                                              "{x}");
  EXPECT_EQ(hostile.find('{', hostile.find('}')), std::string::npos) << hostile;
  EXPECT_EQ(hostile.substr(0, 4), "tg:{");
  EXPECT_EQ(hostile[12], '}');
}

TEST(ClusterUrl, ParsesSeedsAndOptions) {
  auto o = ParseRedisClusterUrl("redis-cluster://:pw@10.0.0.1:7000,10.0.0.2:7001?timeout_ms=40");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->seeds.size(), 2u);
  EXPECT_EQ(o->seeds[0], "10.0.0.1:7000");
  EXPECT_EQ(o->seeds[1], "10.0.0.2:7001");
  EXPECT_EQ(o->node.password, "pw");
  EXPECT_EQ(o->node.call_timeout.count(), 40);
  EXPECT_FALSE(ParseRedisClusterUrl("redis://h:1").ok());
  EXPECT_FALSE(ParseRedisClusterUrl("redis-cluster://h:1/2").ok());
  EXPECT_FALSE(ParseRedisClusterUrl("redis-cluster://").ok());
}

TEST(ClusterUrl, RedissClusterTurnsOnTlsForEveryNode) {
  auto o = ParseRedisClusterUrl(
      "rediss-cluster://:pw@10.0.0.1:7000,10.0.0.2:7001?tls_ca_file=/ca.pem&tls_server_name=r.x");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->seeds.size(), 2u);
  EXPECT_EQ(o->seeds[1], "10.0.0.2:7001");
  EXPECT_TRUE(o->node.tls);
  EXPECT_EQ(o->node.tls_ca_file, "/ca.pem");
  EXPECT_EQ(o->node.tls_server_name, "r.x");
  EXPECT_FALSE(ParseRedisClusterUrl("redis-cluster://h:1?tls_ca_file=/ca.pem").ok());
}

// With tls-cluster yes a node reports "tls-port" (and "port" only when a plain
// port is open too): a TLS client must use the TLS port.
TEST(ClusterSlots, TlsClientsUseTheTlsPortOfClusterShards) {
  const std::string resp = Arr(1) + Arr(4) + Bulk("slots") + Arr(2) + Int(0) + Int(16383) +
                           Bulk("nodes") + Arr(1) + Arr(10) + Bulk("id") + Bulk("a") +
                           Bulk("port") + Int(7000) + Bulk("tls-port") + Int(17000) + Bulk("ip") +
                           Bulk("10.0.0.1") + Bulk("role") + Bulk("master");
  Reply r = ParseResp(resp);
  auto plain = ParseClusterShards(r.get(), "", /*tls=*/false);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->masters, std::vector<std::string>{"10.0.0.1:7000"});
  auto tls = ParseClusterShards(r.get(), "", /*tls=*/true);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_EQ(tls->masters, std::vector<std::string>{"10.0.0.1:17000"});
}

}  // namespace
}  // namespace tollgate::redis
