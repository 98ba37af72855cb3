// RedisStore over TLS (rediss://) against a real redis-server with --tls-port:
// the store contract and exact bursts over TLS, peer and host name
// verification, mTLS, the insecure opt-out, bad TLS files, and a handshake
// that never completes (bounded by connect_timeout).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "store_contract.h"
#include "testing/redis_server.h"
#include "testing/timing.h"
#include "tollgate/redis_store.h"

namespace tollgate::testing {

RedisServer::StartResult StartTlsRedis(bool auth_clients = false) {
  RedisServer::Options so;
  so.tls = true;
  so.tls_auth_clients = auth_clients;
  return RedisServer::Start(so);
}

// Options for the server's TLS port, verified against the test CA; timeouts
// (which the calls are expected to meet) scaled for a loaded machine.
RedisOptions TlsOptions(const RedisServer& server) {
  auto o = ParseRedisUrl(server.tls_url() + "?tls_ca_file=" + server.ca_file());
  if (!o.ok()) return RedisOptions{};
  o->call_timeout = Scaled(o->call_timeout);
  o->connect_timeout = Scaled(o->connect_timeout);
  return *o;
}

RedisServer* SharedTlsRedis() {
  static auto start = StartTlsRedis();
  return start.server.get();
}

INSTANTIATE_TEST_SUITE_P(RedisTls, StoreContractTest,
                         ::testing::Values(StoreFactory([]() -> std::unique_ptr<Store> {
                           RedisServer* server = SharedTlsRedis();
                           if (server == nullptr) return nullptr;
                           auto s = RedisStore::Create(TlsOptions(*server));
                           return s.ok() ? std::move(*s) : nullptr;
                         })));

}  // namespace tollgate::testing

namespace tollgate {
namespace {

using testing::RedisServer;
using testing::Scaled;
using testing::TlsOptions;
using namespace std::chrono_literals;

#define TOLLGATE_START_TLS_REDIS(var, auth_clients)                \
  auto var##_start = testing::StartTlsRedis(auth_clients);         \
  if (var##_start.missing) GTEST_SKIP() << var##_start.error;      \
  ASSERT_TRUE(var##_start.server != nullptr) << var##_start.error; \
  RedisServer& var = *var##_start.server

Limit Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

std::string Text(const Status& st) { return st.ToString(); }

// The first decision on a fresh store: it waits for the first connection
// attempt, so a failed handshake shows up here as that attempt's error.
Result<Decision> FirstDecision(const RedisOptions& o) {
  auto store = RedisStore::Create(o);
  if (!store.ok()) return store.status();
  return AcquireOne(**store, "first", Bucket(1, 5), 1);
}

TEST(RedisTls, ConcurrentBurstOverTlsIsExact) {
  TOLLGATE_START_TLS_REDIS(server, false);
  RedisOptions o = TlsOptions(server);
  ASSERT_TRUE(o.tls);
  o.connections = 3;
  auto store = RedisStore::Create(o);
  ASSERT_TRUE(store.ok()) << Text(store.status());
  const Limit l = Bucket(0.001, 300);  // no refill within the test
  std::atomic<int> allowed{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        auto d = AcquireOne(**store, "hot", l, 1);
        if (!d.ok()) {
          errors.fetch_add(1);
        } else if (d->allowed) {
          allowed.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(allowed.load(), 300);  // 640 asked, exactly the burst granted
  // The state is really in that Redis (read over the plain admin port).
  EXPECT_NE(server.Command({"EXISTS", (*store)->RedisKeyFor("hot")}), "0");
  // A name that matches the certificate's DNS SAN (and goes out as SNI) works too.
  RedisOptions by_name = TlsOptions(server);
  by_name.host = "localhost";
  auto d = FirstDecision(by_name);
  ASSERT_TRUE(d.ok()) << Text(d.status());
  EXPECT_TRUE(d->allowed);
}

TEST(RedisTls, UntrustedServerIsAConnectionErrorNotAHang) {
  TOLLGATE_START_TLS_REDIS(server, false);
  RedisOptions wrong_ca = TlsOptions(server);
  wrong_ca.tls_ca_file = server.other_ca_file();
  wrong_ca.call_timeout = Scaled(3000ms);
  RedisOptions system_store = TlsOptions(server);  // the test CA is in no system store
  system_store.tls_ca_file.clear();
  system_store.call_timeout = Scaled(3000ms);
  for (const RedisOptions& o : {wrong_ca, system_store}) {
    const auto start = std::chrono::steady_clock::now();
    auto d = FirstDecision(o);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kConnection) << Text(d.status());
    EXPECT_NE(Text(d.status()).find("TLS handshake failed"), std::string::npos) << Text(d.status());
    EXPECT_NE(Text(d.status()).find("certificate"), std::string::npos) << Text(d.status());
    // Failed at the handshake, long before the call's own timeout.
    EXPECT_LT(std::chrono::steady_clock::now() - start, o.call_timeout);
  }
}

TEST(RedisTls, HostNameIsVerified) {
  TOLLGATE_START_TLS_REDIS(server, false);
  RedisOptions o = TlsOptions(server);
  o.tls_server_name = "redis.example.com";  // the certificate names 127.0.0.1 and localhost
  auto d = FirstDecision(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kConnection) << Text(d.status());
  EXPECT_NE(Text(d.status()).find("hostname mismatch"), std::string::npos) << Text(d.status());

  // The explicit opt-out accepts it (and an untrusted CA): encryption only.
  o.tls_ca_file = server.other_ca_file();
  o.tls_insecure_skip_verify = true;
  auto insecure = FirstDecision(o);
  ASSERT_TRUE(insecure.ok()) << Text(insecure.status());
  EXPECT_TRUE(insecure->allowed);
}

TEST(RedisTls, ClientCertificateRequiredByServer) {
  TOLLGATE_START_TLS_REDIS(server, true);
  RedisOptions without = TlsOptions(server);
  without.call_timeout = Scaled(3000ms);
  auto denied = FirstDecision(without);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kConnection) << Text(denied.status());

  RedisOptions with = TlsOptions(server);
  with.tls_cert_file = server.client_cert_file();
  with.tls_key_file = server.client_key_file();
  auto d = FirstDecision(with);
  ASSERT_TRUE(d.ok()) << Text(d.status());
  EXPECT_TRUE(d->allowed);
}

TEST(RedisTls, BadTlsFilesAreRejectedAtCreate) {
  TOLLGATE_START_TLS_REDIS(server, false);
  RedisOptions missing_ca = TlsOptions(server);
  missing_ca.tls_ca_file = server.dir() + "/nope.pem";
  RedisOptions cert_only = TlsOptions(server);
  cert_only.tls_cert_file = server.client_cert_file();
  RedisOptions mismatched = TlsOptions(server);
  mismatched.tls_cert_file = server.client_cert_file();
  mismatched.tls_key_file = server.dir() + "/server.key";
  for (const RedisOptions& o : {missing_ca, cert_only, mismatched}) {
    auto s = RedisStore::Create(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << Text(s.status());
  }
}

// A server that accepts TCP but never answers the TLS handshake (stopped):
// connect_timeout covers the handshake, the store does not hang on it.
TEST(RedisTls, ConnectTimeoutCoversTheHandshake) {
  TOLLGATE_START_TLS_REDIS(server, false);
  server.Pause();
  RedisOptions o = TlsOptions(server);
  o.connect_timeout = 200ms;
  o.call_timeout = Scaled(4000ms);
  const auto start = std::chrono::steady_clock::now();
  auto d = FirstDecision(o);
  const auto took = std::chrono::steady_clock::now() - start;
  server.Resume();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kTimeout) << Text(d.status());
  EXPECT_NE(Text(d.status()).find("not connected within 200ms"), std::string::npos)
      << Text(d.status());
  EXPECT_LT(took, o.call_timeout / 2);  // ended by the connect timeout, not the call's
}

TEST(RedisTls, ReconnectsOverTlsAfterRestart) {
  TOLLGATE_START_TLS_REDIS(server, false);
  RedisOptions o = TlsOptions(server);
  o.call_timeout = Scaled(1000ms);
  auto store = RedisStore::Create(o);
  ASSERT_TRUE(store.ok()) << Text(store.status());
  const Limit l = Bucket(0.001, 100);
  auto d = AcquireOne(**store, "r", l, 1);
  ASSERT_TRUE(d.ok()) << Text(d.status());
  ASSERT_EQ(server.Restart(), "");
  // Calls fail (connection lost) until a reconnect, then work again; bounded.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto again = AcquireOne(**store, "r", l, 1);
        return again.ok() && again->allowed;
      },
      4s, 10ms));
  EXPECT_GE((*store)->Stats().connects, 2u);
}

}  // namespace
}  // namespace tollgate
