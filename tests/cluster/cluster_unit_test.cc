// Slot math, topology parsing and the cluster key layout (no servers).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tollgate::redis
