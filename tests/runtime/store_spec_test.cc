// The one store-spec grammar (tollgate/store_spec.h): every URL tollgated,
// the CLI and MakeStore accepted before it still parses, bad ones are refused
// naming where and why, and OpenStore builds what the spec says (no servers:
// remote stores connect lazily, so opening one needs no Redis).
#include "tollgate/store_spec.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "runtime/etcd_watch.h"
#include "testing/hostile_redis.h"
#include "testing/timing.h"
#include "tollgate/clock.h"
#include "tollgate/local_store.h"
#include "tollgate/redis_cluster_store.h"
#include "tollgate/redis_store.h"
#include "tollgate/resilient_store.h"

namespace tollgate {
namespace {

StoreSpec Spec(std::string url) {
  StoreSpec s;
  s.url = std::move(url);
  return s;
}

TEST(StoreSpec, EverySchemeOfTodayParses) {
  const std::pair<const char*, StoreScheme> ok[] = {
      {"local", StoreScheme::kLocal},
      {"local://", StoreScheme::kLocal},
      {"local://?max_keys=1024&shards=4&overflow=reject&max_keys_per_rule=10", StoreScheme::kLocal},
      {"redis://127.0.0.1:6379", StoreScheme::kRedis},
      {"redis://bob:s%40cret@10.0.0.5:6380/3?prefix=rl:&timeout_ms=50&pool=3", StoreScheme::kRedis},
      {"redis://[::1]:7000", StoreScheme::kRedis},
      {"rediss://:pw@127.0.0.1:6380?tls_insecure_skip_verify=1", StoreScheme::kRedis},
      {"redis-cluster://127.0.0.1:7000,127.0.0.1:7001", StoreScheme::kRedisCluster},
      {"rediss-cluster://:pw@127.0.0.1:7000?tls_insecure_skip_verify=1",
       StoreScheme::kRedisCluster},
  };
  for (const auto& [url, scheme] : ok) {
    auto s = StoreSchemeOf(url);
    ASSERT_TRUE(s.ok()) << url << ": " << s.status().ToString();
    EXPECT_EQ(*s, scheme) << url;
    EXPECT_TRUE(CheckStoreSpec(Spec(url)).ok())
        << url << ": " << CheckStoreSpec(Spec(url)).ToString();
  }
}

TEST(StoreSpec, ErrorsSayWhereAndWhy) {
  Status unknown = CheckStoreSpec(Spec("memcached://x"));
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("store: unknown store URL 'memcached://x'"), std::string::npos)
      << unknown.ToString();
  EXPECT_NE(unknown.message().find("redis-cluster://"), std::string::npos) << unknown.ToString();
  // Hostile bytes are not echoed raw, and a long URL is cut.
  Status hostile = CheckStoreSpec(Spec(std::string("x\n\x01") + std::string(500, 'a')));
  EXPECT_EQ(hostile.message().find('\n'), std::string::npos);
  EXPECT_LT(hostile.message().size(), 300u);
  Status local = CheckStoreSpec(Spec("local://?max_keys=0"));
  EXPECT_EQ(local.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(local.message().find("store: "), std::string::npos) << local.ToString();
  EXPECT_NE(local.message().find("max_keys"), std::string::npos) << local.ToString();
  EXPECT_FALSE(CheckStoreSpec(Spec("local://?bogus=1")).ok());
  Status port = CheckStoreSpec(Spec("redis://host:99999"));
  EXPECT_NE(port.message().find("store: "), std::string::npos) << port.ToString();
  EXPECT_FALSE(CheckStoreSpec(Spec("redis-cluster://")).ok());
  EXPECT_FALSE(CheckStoreSpec(Spec("redis-cluster://h:1/2")).ok());  // clusters have only db 0
  StoreSpec fraction = Spec("redis://h:1");
  fraction.resilience = ResilienceSpec{};
  fraction.resilience->degrade_fraction = 0;
  EXPECT_NE(CheckStoreSpec(fraction).message().find("degrade_fraction"), std::string::npos);
  EXPECT_FALSE(MakeStore("local", nullptr).ok());
}

TEST(StoreSpec, LocalOptionsFromTheQueryWinOverTheSpec) {
  StoreSpec s = Spec("local://?max_keys=2048&overflow=allow");
  s.local.max_keys = 1 << 20;
  s.local.max_keys_per_group = 7;
  auto o = LocalOptionsOf(s);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->max_keys, 2048u);
  EXPECT_EQ(o->overflow, OverflowPolicy::kAllow);
  EXPECT_EQ(o->max_keys_per_group, 7u);
}

TEST(StoreSpec, OpensWhatTheSpecSays) {
  auto local = OpenStore(Spec("local://?max_keys=1024"));
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(local->scheme, StoreScheme::kLocal);
  EXPECT_NE(local->local, nullptr);
  EXPECT_EQ(local->store->Name(), "local");
  EXPECT_TRUE(local->BackingHealthy());

  // Resilience wraps remote stores only.
  StoreSpec resilient_local = Spec("local");
  resilient_local.resilience = ResilienceSpec{};
  auto still_local = OpenStore(resilient_local);
  ASSERT_TRUE(still_local.ok());
  EXPECT_EQ(still_local->resilient, nullptr);

  // Nothing listens on port 1: the stores connect lazily, so opening works.
  auto bare = OpenStore(Spec("redis://127.0.0.1:1?connect_timeout_ms=50&timeout_ms=50"));
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_NE(bare->redis, nullptr);
  EXPECT_EQ(bare->resilient, nullptr);
  EXPECT_EQ(bare->store->Name(), "redis");

  StoreSpec wrapped = Spec("redis-cluster://127.0.0.1:1?connect_timeout_ms=50");
  wrapped.call_timeout = std::chrono::milliseconds(50);
  wrapped.resilience = ResilienceSpec{};
  wrapped.resilience->mode = FailureMode::kClosed;
  auto cluster = OpenStore(wrapped);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  EXPECT_NE(cluster->cluster, nullptr);
  ASSERT_NE(cluster->resilient, nullptr);
  EXPECT_EQ(cluster->store->Name(), "resilient(redis-cluster)");
  EXPECT_NE(cluster->description.find("failure mode closed"), std::string::npos)
      << cluster->description;
  EXPECT_FALSE(cluster->BackingHealthy());  // nothing to talk to
}

// StoreEnv::io_clock reaches the remote store: a call's deadline passes when the
// injected I/O clock says so (a fake Redis that answers nothing after the
// handshake), while the decision clock (StoreEnv::clock) is left alone.
TEST(StoreSpec, TheEnvsIoClockTimesTheRemoteStoresDeadlines) {
  testing::HostileRedis::Options ho;
  ho.reply = testing::HostileRedis::Reply::kSilence;
  ho.answer_script_load = true;
  std::string error;
  auto server = testing::HostileRedis::Start(ho, &error);
  ASSERT_TRUE(server) << error;

  ManualClock io;
  StoreEnv env;
  env.io_clock = &io;
  auto opened = OpenStore(Spec(server->url() + "?timeout_ms=20&pool=1"), env);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();

  LimitSpec spec;
  spec.rate = 1;
  spec.burst = 5;
  const Limit limit = *Limit::Create(spec);
  const AcquireItem item{"k", &limit, 1};
  std::atomic<bool> answered{false}, timed_out{false};
  opened->store->AcquireAsync({&item, 1}, [&](Result<BatchDecision> r) {
    timed_out = !r.ok() && r.status().code() == StatusCode::kTimeout;
    answered = true;
  });
  ASSERT_TRUE(testing::WaitFor([&] { return server->Received("EVALSHA"); }))
      << "the call was never sent";
  // Not synchronisation: real time passes the 20 ms deadline many times over
  // while the I/O clock stands still; a store on the system clock answers.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(answered.load()) << "the deadline ran on real time: io_clock was not passed on";

  io.Advance(std::chrono::milliseconds(21));
  ASSERT_TRUE(testing::WaitFor([&] { return answered.load(); }))
      << "the deadline did not pass when the I/O clock did";
  EXPECT_TRUE(timed_out.load());
}

// A password in a store URL never reaches an error message: a bad URL on each
// parser (the scheme, redis://, rediss-cluster://, their options) and each
// entry point (CheckStoreSpec, OpenStore, the etcd:// source's parser), with
// the password in user info (also holding a raw '/', '?' or '@') or in a
// sensitive query parameter.
TEST(StoreSpec, ErrorsNeverQuoteAPassword) {
  const char* bad[] = {
      "reddis://:s3cret@10.0.0.1:6379",       // unknown scheme
      "redis://:s3cret@",                     // no host
      "redis://bob:s3cret@[::1",              // unclosed '['
      "redis://:s3cret@[::1]x",               // bytes after ']'
      "redis://:s3cret@h:99999",              // port
      "redis://:s3cret@h/zz",                 // database
      "redis://:s3cret@h?nope=1",             // option
      "redis://h?password=s3cret",            // a password as an option
      "redis://h?token=s3cret",               // a token as an option
      "redis://:s3/cret@h:1",                 // a raw '/' in the password
      "redis://:s3?cret@h:1",                 // a raw '?'
      "redis://:s3cret:x@h:99999",            // ':' in the password
      "rediss://:s3cret@h?tls_ca_file=",      // a TLS option
      "redis-cluster://:s3cret@a:1,b:99999",  // a seed's port
      "redis-cluster://:s3cret@a:1/2",        // a database on a cluster
      "rediss-cluster://:s3/cret@a:1",        // a raw '/'
      "redis-clusterr://:s3cret@a:1",         // unknown scheme
      "local://?max_keys=1&token=s3cret",     // local options
  };
  for (const char* url : bad) {
    SCOPED_TRACE(url);
    const Status checked = CheckStoreSpec(Spec(url));
    ASSERT_FALSE(checked.ok());
    EXPECT_EQ(checked.message().find("s3"), std::string::npos) << checked.message();
    EXPECT_EQ(checked.message().find("cret"), std::string::npos) << checked.message();
    auto opened = OpenStore(Spec(url), StoreEnv{});
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().message().find("s3"), std::string::npos) << opened.status().message();
  }
  for (const char* url : {"etcd://u:s3cret@127.0.0.1:2379/k", "etcd://u:s3/cret@127.0.0.1:1/k",
                          "etcd://127.0.0.1:1,u:s3cret@h:2/k", "etcd://u:s3cret@/k"}) {
    auto parsed = etcd::ParseEtcdUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.status().message().find("s3"), std::string::npos) << parsed.status().message();
  }
}

// A store that cannot connect fails its calls naming host and port, never the password.
TEST(StoreSpec, ConnectErrorsNeverQuoteAPassword) {
  auto opened =
      OpenStore(Spec("redis://bob:s3cret@127.0.0.1:1?timeout_ms=50&connect_timeout_ms=50&pool=1"),
                StoreEnv{});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  LimitSpec spec;
  spec.rate = 1;
  spec.burst = 5;
  const Limit limit = *Limit::Create(spec);
  const AcquireItem item{"k", &limit, 1};
  std::mutex mu;
  std::optional<Status> failure;
  opened->store->AcquireAsync({&item, 1}, [&](Result<BatchDecision> r) {
    std::lock_guard<std::mutex> lock(mu);
    failure = r.ok() ? Status::Ok() : r.status();
  });
  ASSERT_TRUE(testing::WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return failure.has_value();
  }));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(failure->ok());
  EXPECT_NE(failure->message().find("127.0.0.1:1"), std::string::npos) << failure->message();
  EXPECT_EQ(failure->message().find("s3cret"), std::string::npos) << failure->message();
}

TEST(StoreSpec, ANullIoClockIsRefused) {
  StoreEnv env;
  env.io_clock = nullptr;
  auto opened = OpenStore(Spec("local"), env);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("io_clock"), std::string::npos);
}

}  // namespace
}  // namespace tollgate
