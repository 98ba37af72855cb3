// Concurrency rules end to end (issue 19): tollgated's gateway holds at most
// max_in_flight requests per key at the upstream, counted there, with many
// clients at once; leases come back when responses end (also after upstream
// errors); /v1/decide hands out leases that /v1/release gives back; and the
// leases of a killed tollgated come back after the lease time on Redis.
// Run per store: local, and a real redis-server.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/redis_server.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr int kMaxInFlight = 3;

std::string ConcurrencyPolicy(const std::string& lease) {
  return R"({"rules": [
    {"name": "inflight", "limit_keys": ["header:x-api-key"], "algorithm": "concurrency",
     "algorithm_config": {"max_in_flight": )" +
         std::to_string(kMaxInFlight) + R"(, "lease": ")" + lease + R"("}}
  ]})";
}

// One request on a fresh connection that may wait at the upstream's gate.
HttpResponse FetchHeld(int port, const std::string& target, const std::string& key) {
  HttpConnection c(port, 60s);
  if (!c.connected()) return HttpResponse{};
  return c.Request("GET", target, {{"X-Api-Key", key}});
}

std::string Key() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info->name();
  for (char& c : name) {
    if (c == '/') c = '-';
  }
  return name + "-" + std::to_string(::getpid());
}

class ConcurrencyE2E : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "redis") {
      redis_ = RedisServer::Start();
      if (redis_.missing) GTEST_SKIP() << redis_.error;
      ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
      store_ = redis_->url();
    }
  }

  server::ServerConfig Config(const TestUpstream& upstream) {
    server::ServerConfig c = TestServer::DefaultConfig();
    c.store = store_;
    c.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
    c.decision_on_main = true;
    c.threads = 2;
    return c;
  }

  std::unique_ptr<TestServer> Start(server::ServerConfig c, const std::string& policy) {
    std::string error;
    auto s = TestServer::Start(std::move(c), policy, &error);
    EXPECT_TRUE(s != nullptr) << error;
    return s;
  }

  std::string store_ = "local";
  RedisServer::StartResult redis_;
};

// Many clients at a closed gate: exactly max_in_flight reach the upstream, the
// rest are refused with a concurrency 429; once the gate opens, the slots
// come back (a lease of an hour could not come back otherwise).
TEST_P(ConcurrencyE2E, GatewayHoldsAtMostMaxInFlightAtTheUpstreamAndReleasesWhenResponsesEnd) {
  TestUpstream upstream;
  auto s = Start(Config(upstream), ConcurrencyPolicy("1h"));
  ASSERT_TRUE(s);
  const std::string key = Key();
  constexpr int kClients = 12;

  upstream.SetGateOpen(false);
  std::vector<HttpResponse> responses(kClients);
  std::atomic<int> done{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      responses[i] = FetchHeld(s->port, "/gate", key);
      done.fetch_add(1);
    });
  }
  // Every client is either at the gate or refused.
  ASSERT_TRUE(WaitFor([&] { return done.load() == kClients - kMaxInFlight; }, 30s))
      << "done " << done.load() << ", at the upstream " << upstream.in_flight();
  ASSERT_TRUE(upstream.WaitInFlight(kMaxInFlight, Scaled(10s)));
  EXPECT_EQ(upstream.peak_in_flight(), kMaxInFlight);

  // A refusal describes the concurrency limit.
  const HttpResponse* refused = nullptr;
  for (const auto& r : responses) {
    if (r.status == 429) refused = &r;
  }
  ASSERT_NE(refused, nullptr);
  EXPECT_NE(refused->Header("ratelimit").find("\"inflight\";r=0"), std::string::npos)
      << refused->Header("ratelimit");
  EXPECT_NE(refused->Header("ratelimit-policy").find("q=3"), std::string::npos)
      << refused->Header("ratelimit-policy");
  // At most 1 s (+ the server's jitter of up to 1 s): a slot frees when a request ends.
  EXPECT_LE(std::atoi(refused->Header("retry-after").c_str()), 2) << refused->Header("retry-after");
  EXPECT_NE(refused->body.find("concurrency limit"), std::string::npos) << refused->body;

  upstream.SetGateOpen(true);
  for (auto& t : clients) t.join();
  int ok = 0, rejected = 0;
  for (const auto& r : responses) {
    ok += r.status == 200;
    rejected += r.status == 429;
    if (r.status == 200) {
      // Allowed responses carry the limit too (r = free slots after the grant).
      EXPECT_NE(r.Header("ratelimit").find("\"inflight\";r="), std::string::npos)
          << r.Header("ratelimit");
    }
  }
  EXPECT_EQ(ok, kMaxInFlight);
  EXPECT_EQ(rejected, kClients - kMaxInFlight);

  // Holders come and go: the slots keep coming back, and the peak at the
  // upstream never passes the limit.
  upstream.ResetPeak();
  std::atomic<int> passed{0};
  clients.clear();
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      for (int n = 0; n < 15; ++n) {
        if (Fetch(s->port, "GET", "/gate", {{"X-Api-Key", key}}).status == 200) passed.fetch_add(1);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_LE(upstream.peak_in_flight(), kMaxInFlight);
  EXPECT_GT(passed.load(), kMaxInFlight);
  EXPECT_EQ(upstream.in_flight(), 0);

  // Metrics count the leases; all are given back (releases run after the
  // response was sent, so the last ones may still be on their way).
  std::string metrics;
  EXPECT_TRUE(WaitFor(
      [&] {
        metrics = Fetch(s->admin_port, "GET", "/metrics").body;
        return metrics.find("tollgate_leases_in_flight{rule=\"inflight\"} 0") != std::string::npos;
      },
      10s))
      << metrics;
}

// A request whose upstream fails (the connection drops mid-body) still gives
// its lease back: after max_in_flight of them, a request passes.
TEST_P(ConcurrencyE2E, LeasesComeBackAfterUpstreamErrors) {
  TestUpstream upstream;
  auto s = Start(Config(upstream), ConcurrencyPolicy("1h"));
  ASSERT_TRUE(s);
  const std::string key = Key();
  for (int i = 0; i < kMaxInFlight + 1; ++i) {
    Fetch(s->port, "GET", "/truncate?n=1000", {{"X-Api-Key", key}});
  }
  // Releases are asynchronous: the slots come back shortly after the errors.
  EXPECT_TRUE(WaitFor(
      [&] {
        return Fetch(s->port, "GET", "/ok", {{"X-Api-Key", key}}).status == 200;
      },
      10s));
}

// /v1/decide hands out a lease token per concurrency rule; /v1/release gives
// it back once; a second release, a forged and a malformed token are harmless.
TEST_P(ConcurrencyE2E, DecideHandsOutLeasesAndReleaseGivesThemBack) {
  TestUpstream upstream;
  auto s = Start(Config(upstream), ConcurrencyPolicy("1h"));
  ASSERT_TRUE(s);
  const std::string key = Key();
  const std::string body =
      json{{"request", {{"path", "/x"}, {"headers", {{"x-api-key", key}}}}}}.dump();
  std::vector<std::string> tokens;
  for (int i = 0; i < kMaxInFlight; ++i) {
    json d = json::parse(Fetch(s->port, "POST", "/v1/decide", {}, body).body);
    ASSERT_TRUE(d["allowed"].get<bool>()) << d;
    ASSERT_EQ(d["leases"].size(), 1u) << d;
    EXPECT_EQ(d["leases"][0]["rule"], "inflight");
    tokens.push_back(d["leases"][0]["lease"]);
  }
  json full = json::parse(Fetch(s->port, "POST", "/v1/decide", {}, body).body);
  EXPECT_FALSE(full["allowed"].get<bool>()) << full;
  EXPECT_FALSE(full.contains("leases")) << full;

  auto release = [&](const json& leases) {
    return Fetch(s->port, "POST", "/v1/release", {}, json{{"leases", leases}}.dump());
  };
  auto first = release(json::array({tokens[0]}));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(json::parse(first.body)["released"], 1) << first.body;
  auto again = release(json::array({tokens[0]}));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(json::parse(again.body)["released"], 0) << again.body;
  EXPECT_EQ(json::parse(again.body)["not_held"], 1) << again.body;

  // A forged id on the same key releases nothing; the other holders keep theirs.
  const std::string forged = std::string(32, 'a') + tokens[1].substr(tokens[1].find('.'));
  auto f = release(json::array({forged}));
  ASSERT_EQ(f.status, 200) << f.body;
  EXPECT_EQ(json::parse(f.body)["released"], 0) << f.body;

  // Malformed: refused with where and why, before any store call.
  for (const json& bad : {json::array({"nodot"}), json::array({"zz.00"}),
                          json::array({"ab.616263"}), json::array({1}), json::array()}) {
    auto r = release(bad);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
  }
  EXPECT_EQ(Fetch(s->port, "POST", "/v1/release", {}, "{").status, 400);

  // Exactly one slot came back.
  json next = json::parse(Fetch(s->port, "POST", "/v1/decide", {}, body).body);
  EXPECT_TRUE(next["allowed"].get<bool>()) << next;
  json over = json::parse(Fetch(s->port, "POST", "/v1/decide", {}, body).body);
  EXPECT_FALSE(over["allowed"].get<bool>()) << over;
}

INSTANTIATE_TEST_SUITE_P(Stores, ConcurrencyE2E, ::testing::Values("local", "redis"));

// A tollgated holding leases on Redis is killed (SIGKILL: no release). Its
// slots stay taken for another tollgated on the same Redis until the lease
// time has passed, then come back.
TEST(ConcurrencyProcess, AKilledHoldersLeasesComeBackAfterTheLeaseTime) {
  if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
  auto redis = RedisServer::Start();
  if (redis.missing) GTEST_SKIP() << redis.error;
  ASSERT_TRUE(redis.server != nullptr) << redis.error;
  ScopedTempDir temp;
  const std::string policy_path = temp.File("policy.json");
  const auto lease = std::chrono::duration_cast<std::chrono::seconds>(Scaled(3s));
  const std::string policy = ConcurrencyPolicy(std::to_string(lease.count()) + "s");
  WriteFile(policy_path, policy);
  TestUpstream upstream;
  upstream.SetGateOpen(false);
  const std::string key = Key();

  auto holder = std::make_unique<Tollgated>(
      std::vector<std::string>{"--policy", policy_path, "--listen", "127.0.0.1:0", "--admin",
                               "127.0.0.1:0", "--threads", "2", "--store", redis->url(),
                               "--upstream", "http://127.0.0.1:" + std::to_string(upstream.port())},
      temp.path());
  ASSERT_TRUE(holder->WaitStarted()) << holder->Log();
  // Every lease is taken after this, so none expires before taken_after + lease.
  const auto taken_after = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int i = 0; i < kMaxInFlight; ++i) {
    clients.emplace_back([&] { FetchHeld(holder->port(), "/gate", key); });
  }
  ASSERT_TRUE(upstream.WaitInFlight(kMaxInFlight, Scaled(10s)));
  const auto killed_at = std::chrono::steady_clock::now();
  holder->Signal(SIGKILL);
  holder.reset();                    // reaps it
  for (auto& t : clients) t.join();  // their connections died with the holder

  TestUpstream other_upstream;
  server::ServerConfig c = TestServer::DefaultConfig();
  c.store = redis->url();
  c.upstream = "http://127.0.0.1:" + std::to_string(other_upstream.port());
  std::string error;
  auto other = TestServer::Start(c, policy, &error);
  ASSERT_TRUE(other) << error;
  auto probe = [&] { return Fetch(other->port, "GET", "/ok", {{"X-Api-Key", key}}).status; };
  const int first = probe();
  const auto first_at = std::chrono::steady_clock::now();
  if (first_at - taken_after < lease) {
    EXPECT_EQ(first, 429) << "the dead holder's leases should still count";
  }
  ASSERT_TRUE(WaitFor([&] { return probe() == 200; }, lease + 10s));
  const auto back_after = std::chrono::steady_clock::now() - killed_at;
  std::printf("leases of the killed holder came back %lld ms after the kill (lease %lld s)\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(back_after).count()),
              static_cast<long long>(lease.count()));
  upstream.SetGateOpen(true);
}

}  // namespace
}  // namespace tollgate::testing
