// Pure parts of the Sentinel mode: the redis-sentinel:// grammar and the
// checks on every sentinel reply (src/redis/sentinel_reply.h), fed through
// the same bounded ReplyReader the connections use.
#include <gtest/gtest.h>

#include <string>

#include "redis/reply_reader.h"
#include "redis/sentinel_reply.h"
#include "tollgate/redis_store.h"
#include "tollgate/store_spec.h"

namespace tollgate::redis {
namespace {

// The one reply `resp` encodes (the test fails on a broken or partial one).
ReplyPtr Reply(const std::string& resp) {
  ReplyReader reader;
  ReplyPtr reply;
  EXPECT_TRUE(reader.Feed(resp.data(), resp.size())) << reader.error();
  EXPECT_TRUE(reader.Next(&reply)) << reader.error();
  EXPECT_NE(reply, nullptr) << "incomplete: " << resp;
  return reply;
}

std::string Bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

TEST(SentinelUrl, ParsesSentinelsMasterAndBothCredentials) {
  auto o = ParseRedisSentinelUrl(
      "redis-sentinel://:s%40pw@10.0.0.1:26379,[::1]:26380,sentinel-3:5000/my-master.1"
      "?master_password=m%3Apw&master_username=app&db=2&prefix=rl:&timeout_ms=50");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->sentinels,
            (std::vector<std::string>{"10.0.0.1:26379", "[::1]:26380", "sentinel-3:5000"}));
  EXPECT_EQ(o->sentinel_master, "my-master.1");
  EXPECT_EQ(o->sentinel_password, "s@pw");
  EXPECT_EQ(o->sentinel_username, "");
  EXPECT_EQ(o->password, "m:pw");
  EXPECT_EQ(o->username, "app");
  EXPECT_EQ(o->db, 2);
  EXPECT_EQ(o->key_prefix, "rl:");
  EXPECT_EQ(o->call_timeout, std::chrono::milliseconds(50));
  EXPECT_TRUE(o->host.empty());  // discovered, never configured

  auto plain = ParseRedisSentinelUrl("redis-sentinel://127.0.0.1:26379/m");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(plain->password.empty());
  EXPECT_TRUE(plain->sentinel_password.empty());
  EXPECT_EQ(plain->db, 0);
  EXPECT_FALSE(plain->tls);

  // rediss-sentinel://: TLS to the sentinels and the master, with rediss://'s options.
  auto tls = ParseRedisSentinelUrl(
      "rediss-sentinel://:s@10.0.0.1:26379,10.0.0.2:26379/m?master_password=p"
      "&tls_ca_file=%2Fetc%2Ftollgate%2Ftls%2Fca.pem&tls_server_name=redis.internal");
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->sentinels, (std::vector<std::string>{"10.0.0.1:26379", "10.0.0.2:26379"}));
  EXPECT_EQ(tls->tls_ca_file, "/etc/tollgate/tls/ca.pem");
  EXPECT_EQ(tls->tls_server_name, "redis.internal");
  EXPECT_EQ(tls->password, "p");
  EXPECT_EQ(tls->sentinel_password, "s");
}

TEST(SentinelUrl, RefusesBadUrlsWithClearErrorsAndNoSecrets) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {
      {"redis-sentinel://:topsecret@127.0.0.1:26379", "missing /<master-name>"},
      {"redis-sentinel://:topsecret@127.0.0.1:26379/", "missing /<master-name>"},
      {"redis-sentinel://:topsecret@127.0.0.1:26379/bad{name}", "master name"},
      {"redis-sentinel://:topsecret@127.0.0.1/m", "host:port"},
      {"redis-sentinel://:topsecret@127.0.0.1:26379,/m", "host:port"},
      {"redis-sentinel://:topsecret@127.0.0.1:0/m", "port must be 1..65535"},
      {"redis-sentinel://:topsecret@127.0.0.1:26379/m?master_password=%zz", "master_password"},
      {"redis-sentinel://:topsecret@127.0.0.1:26379/m?master_username=u", "needs master_password"},
      {"redis-sentinel://:topsecret@127.0.0.1:26379/m?db=x", "db must be a number"},
      {"redis-sentinel://:topsecret@127.0.0.1:26379/m?tls_ca_file=x", "unknown or bad option"},
      {"rediss-sentinel://:topsecret@127.0.0.1:26379/m?tls_ca_file=", "bad value for tls_ca_file"},
      {"rediss-sentinel://:topsecret@127.0.0.1:26379/m?tls_insecure_skip_verify=yes",
       "unknown or bad option"},
      {"redis-sentinel:///m", "host:port"},
  };
  for (const auto& c : cases) {
    auto o = ParseRedisSentinelUrl(c.url);
    ASSERT_FALSE(o.ok()) << c.url;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_NE(o.status().message().find(c.says), std::string::npos)
        << c.url << " -> " << o.status().message();
    EXPECT_EQ(o.status().message().find("topsecret"), std::string::npos) << o.status().message();
    // The store-spec grammar says the same, through the same parser.
    StoreSpec spec;
    spec.url = c.url;
    Status checked = CheckStoreSpec(spec);
    EXPECT_FALSE(checked.ok()) << c.url;
    EXPECT_EQ(checked.message().find("topsecret"), std::string::npos) << checked.message();
  }
}

TEST(SentinelUrl, IsAKnownStoreScheme) {
  auto scheme = StoreSchemeOf("redis-sentinel://127.0.0.1:26379/m");
  ASSERT_TRUE(scheme.ok()) << scheme.status().ToString();
  EXPECT_EQ(*scheme, StoreScheme::kRedis);
  StoreSpec spec;
  spec.url = "redis-sentinel://:pw@127.0.0.1:26379,127.0.0.1:26380/m?master_password=x";
  EXPECT_TRUE(CheckStoreSpec(spec).ok()) << CheckStoreSpec(spec).ToString();
  auto unknown = StoreSchemeOf("sentinel://x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("redis-sentinel://"), std::string::npos);
}

TEST(SentinelReply, MasterAddressIsTypeChecked) {
  auto good = ParseMasterAddrReply(Reply("*2\r\n" + Bulk("10.1.2.3") + Bulk("6380")).get(), "m");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->host, "10.1.2.3");
  EXPECT_EQ(good->port, 6380);
  EXPECT_EQ(good->ToString(), "10.1.2.3:6380");
  auto v6 = ParseMasterAddrReply(Reply("*2\r\n" + Bulk("::1") + Bulk("7000")).get(), "m");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->ToString(), "[::1]:7000");

  struct Case {
    std::string resp;
    const char* says;
  } cases[] = {
      {"*-1\r\n", "does not know a master named 'm'"},
      {"$-1\r\n", "does not know a master named 'm'"},
      {"-ERR unknown command\r\n", "ERR unknown command"},
      {":42\r\n", "got an integer"},
      {"+OK\r\n", "got a status"},
      {"*3\r\n" + Bulk("h") + Bulk("1") + Bulk("x"), "got an array of 3"},
      {"*2\r\n:1\r\n:2\r\n", "got an array of 2"},
      {"*2\r\n" + Bulk(std::string(300, 'a')) + Bulk("6379"), "bad host"},
      {"*2\r\n" + Bulk("evil\r\nhost") + Bulk("6379"), "bad host 'evil??host'"},
      {"*2\r\n" + Bulk("") + Bulk("6379"), "bad host"},
      {"*2\r\n" + Bulk("10.0.0.1") + Bulk("0"), "bad port"},
      {"*2\r\n" + Bulk("10.0.0.1") + Bulk("65536"), "bad port"},
      {"*2\r\n" + Bulk("10.0.0.1") + Bulk("99999999999999999999"), "bad port"},
      {"*2\r\n" + Bulk("10.0.0.1") + Bulk("-1"), "bad port"},
      {"*2\r\n" + Bulk("10.0.0.1") + Bulk(" 80"), "bad port"},
      {"*2\r\n*1\r\n" + Bulk("h") + Bulk("1"), "got an array of 2"},
  };
  for (const auto& c : cases) {
    auto r = ParseMasterAddrReply(Reply(c.resp).get(), "m");
    ASSERT_FALSE(r.ok()) << c.resp;
    EXPECT_EQ(r.status().code(), StatusCode::kServer);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.resp << " -> " << r.status().message();
    EXPECT_LE(r.status().message().size(), 200u);
  }
}

TEST(SentinelReply, RoleSubscribeAndSwitchMessages) {
  auto master = ParseRoleReply(Reply("*3\r\n" + Bulk("master") + ":10\r\n*0\r\n").get());
  ASSERT_TRUE(master.ok());
  EXPECT_EQ(*master, "master");
  auto replica = ParseRoleReply(
      Reply("*5\r\n" + Bulk("slave") + Bulk("h") + ":1\r\n" + Bulk("connected") + ":1\r\n").get());
  ASSERT_TRUE(replica.ok());
  EXPECT_EQ(*replica, "slave");
  EXPECT_FALSE(ParseRoleReply(Reply(":1\r\n").get()).ok());
  EXPECT_FALSE(ParseRoleReply(Reply("*0\r\n").get()).ok());
  EXPECT_FALSE(ParseRoleReply(Reply("*1\r\n" + Bulk("boss")).get()).ok());
  EXPECT_FALSE(ParseRoleReply(Reply("-NOAUTH Authentication required.\r\n").get()).ok());

  EXPECT_TRUE(CheckSubscribeReply(
                  Reply("*3\r\n" + Bulk("subscribe") + Bulk("+switch-master") + ":1\r\n").get())
                  .ok());
  EXPECT_FALSE(CheckSubscribeReply(Reply(":1\r\n").get()).ok());

  auto msg = [](const std::string& text) {
    return "*3\r\n" + Bulk("message") + Bulk("+switch-master") + Bulk(text);
  };
  auto ours = ParseSwitchMaster(Reply(msg("m 127.0.0.1 6379 127.0.0.1 6380")).get(), "m");
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  ASSERT_TRUE(ours->has_value());
  EXPECT_EQ((*ours)->ToString(), "127.0.0.1:6380");
  auto theirs = ParseSwitchMaster(Reply(msg("other 1.1.1.1 1 2.2.2.2 2")).get(), "m");
  ASSERT_TRUE(theirs.ok());
  EXPECT_FALSE(theirs->has_value());
  EXPECT_FALSE(ParseSwitchMaster(Reply(msg("m 1.1.1.1 1 2.2.2.2")).get(), "m").ok());
  EXPECT_FALSE(ParseSwitchMaster(Reply(msg("m 1.1.1.1 1 2.2.2.2 2 extra")).get(), "m").ok());
  EXPECT_FALSE(ParseSwitchMaster(Reply(msg("m 1.1.1.1 1 bad/host 2")).get(), "m").ok());
  EXPECT_FALSE(ParseSwitchMaster(Reply(msg("m 1.1.1.1 1 2.2.2.2 70000")).get(), "m").ok());
  EXPECT_FALSE(ParseSwitchMaster(Reply(":1\r\n").get(), "m").ok());
  EXPECT_FALSE(ParseSwitchMaster(Reply(msg(std::string(5000, 'x'))).get(), "m").ok());
}

}  // namespace
}  // namespace tollgate::redis
