// Runs the real tollgated binary as a child process: signals (SIGTERM drain,
// SIGHUP reload), reload on file change, --help and config errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "server/log.h"
#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "tollgate/http_text.h"
#if TOLLGATE_TEST_GRPC
#include <grpcpp/grpcpp.h>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#endif

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    policy_ = dir_ + "/policy.json";
    WriteFile(policy_, GenerousPolicy(1000000));
  }
  ScopedTempDir temp_;  // every file of the test, tollgated's logs too
  const std::string dir_ = temp_.path();
  std::string policy_;
};

TEST_F(ProcessTest, SigtermDrainsInFlightRequestsThenExits) {
  TestUpstream upstream;
  Tollgated t(
      {"--policy", policy_, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--threads", "2",
       "--upstream", "http://127.0.0.1:" + std::to_string(upstream.port())},
      dir_);
  ASSERT_TRUE(t.WaitStarted()) << "log: " << t.Log() << " stdout: " << t.Stdout();
  HttpConnection idle(t.port());
  ASSERT_EQ(idle.Request("GET", "/healthz").status, 200);

  HttpResponse slow;
  std::thread client([&] { slow = Fetch(t.port(), "GET", "/slow?ms=800", {{"X-Api-Key", "k"}}); });
  ASSERT_TRUE(WaitFor([&] { return upstream.requests() == 1; }));
  t.Signal(SIGTERM);
  // No new connections once draining; idle keep-alive connections are closed.
  EXPECT_TRUE(WaitFor([&] { return !HttpConnection(t.port()).connected(); }, 3s));
  EXPECT_TRUE(idle.WaitClosed(3s));
  client.join();
  ASSERT_TRUE(slow.ok) << slow.error;
  EXPECT_EQ(slow.status, 200);  // the in-flight request completed
  EXPECT_FALSE(slow.keep_alive);
  EXPECT_EQ(t.WaitExit(5s), 0) << t.Log();
  EXPECT_NE(t.Log().find("\"msg\":\"draining\""), std::string::npos);
}

TEST_F(ProcessTest, ReloadsOnSighupAndWhenThePolicyFileChanges) {
  WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + policy_ + R"(",
      "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 1,
      "policy_poll_interval_ms": 50})");
  Tollgated t({"--config", dir_ + "/tollgated.json"}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << "log: " << t.Log() << " stdout: " << t.Stdout();
  auto generation = [&] {
    auto r = Fetch(t.admin_port(), "GET", "/v1/policy");
    return r.ok ? json::parse(r.body)["generation"].get<int>() : -1;
  };
  EXPECT_EQ(generation(), 1);
  WriteFile(policy_, GenerousPolicy(2000000));
  EXPECT_TRUE(WaitFor([&] { return generation() == 2; })) << t.Log();
  // A broken file is reported and ignored; the live policy stays.
  WriteFile(policy_, "{broken");
  EXPECT_TRUE(WaitFor([&] { return t.Log().find("policy_reload_failed") != std::string::npos; }));
  EXPECT_EQ(generation(), 2);
  WriteFile(policy_, GenerousPolicy(3000000));
  EXPECT_TRUE(WaitFor([&] { return generation() == 3; })) << t.Log();
  t.Signal(SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return generation() == 4; })) << t.Log();
  EXPECT_TRUE(WaitFor([&] { return t.Log().find("\"trigger\":\"sighup\"") != std::string::npos; }))
      << t.Log();  // logged a moment after the reload serves
  t.Signal(SIGINT);
  EXPECT_EQ(t.WaitExit(5s), 0);
}

// Issue 18 through the real binary: a deny list (403 with a problem body on
// the gateway, /v1/auth and /v1/decide), a CIDR allow list matched on the
// client address a trusted proxy forwards, a tenant table from a file beside
// the policy, and /v1/decide's per-item limits behind the admin token.
TEST_F(ProcessTest, ExemptionsTenantsAndItemLimitsOverSockets) {
  TestUpstream upstream;
  WriteFile(dir_ + "/denied.txt", "# abusive networks\n192.0.2.0/24\n2001:db8:bad::/48\n");
  WriteFile(dir_ + "/tenants.csv", "identity,count,period\nbig,4,1h\n");
  WriteFile(policy_, R"({"rules": [
    {"name": "denylist", "action": "deny", "match": {"cidr": {"file": "denied.txt"}}},
    {"name": "internal", "action": "allow", "match": {"cidr": ["10.0.0.0/8"]}},
    {"name": "per-tenant", "limit_keys": ["header:x-api-key"], "tenants": "tenants.csv",
     "algorithm_config": {"count": 2, "period": "1h"}},
    {"name": "per-ip", "limit_keys": ["ip:address"], "match": {"header:x-api-key": {"absent": true}},
     "algorithm_config": {"count": 2, "period": "1h"}}]})");
  const std::string token = "tok-" + std::to_string(::getpid()) + "-policy-match";
  WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + policy_ + R"(", "listen": "127.0.0.1:0",
      "admin": {"listen": "127.0.0.1:0", "token": ")" +
                                          token + R"("}, "threads": 1,
      "decision_on_main": true, "trusted_proxies": ["127.0.0.1"],
      "gateway": {"upstream": "http://127.0.0.1:)" +
                                          std::to_string(upstream.port()) + R"("}})");
  Tollgated t({"--config", dir_ + "/tollgated.json"}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << "log: " << t.Log() << " stdout: " << t.Stdout();
  auto via = [&](const std::string& client, Headers extra = {}) {
    extra.push_back({"X-Forwarded-For", client});
    return Fetch(t.port(), "GET", "/items", extra);
  };

  // Deny list: 403 with a problem body, never forwarded.
  HttpResponse denied = via("192.0.2.77");
  ASSERT_TRUE(denied.ok) << denied.error;
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(json::parse(denied.body)["status"], 403) << denied.body;
  EXPECT_EQ(json::parse(denied.body)["violated-policies"][0], "denylist");
  EXPECT_EQ(via("2001:db8:bad::1").status, 403);
  EXPECT_EQ(upstream.requests(), 0);
  // nginx auth_request sees 403 too.
  EXPECT_EQ(Fetch(t.port(), "GET", "/v1/auth", {{"X-Forwarded-For", "192.0.2.77"}}).status, 403);

  // Allow list: past the per-ip limit (2), every request is forwarded.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(via("10.9.8.7").status, 200) << i;
  // Anyone else: the per-ip limit.
  EXPECT_EQ(via("203.0.113.5").status, 200);
  EXPECT_EQ(via("203.0.113.5").status, 200);
  EXPECT_EQ(via("203.0.113.5").status, 429);

  // Tenant table: "big" has 4 an hour, an unknown key the rule's 2.
  int big = 0, other = 0;
  for (int i = 0; i < 6; ++i) {
    big += via("203.0.113.6", {{"X-Api-Key", "big"}}).status == 200;
    other += via("203.0.113.6", {{"X-Api-Key", "someone"}}).status == 200;
  }
  EXPECT_EQ(big, 4);
  EXPECT_EQ(other, 2);

  // /v1/decide with a described request: the deny rule's verdict and status.
  HttpResponse d = Fetch(t.port(), "POST", "/v1/decide", {{"Content-Type", "application/json"}},
                         R"({"request": {"path": "/x", "client_ip": "192.0.2.1"}})");
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(json::parse(d.body)["status"], 403) << d.body;
  EXPECT_EQ(json::parse(d.body)["denied_rule"], "denylist") << d.body;
  // The rule's action and what it did, not a placeholder limit.
  const json denied_rule = json::parse(d.body)["rules"][0];
  EXPECT_EQ(denied_rule["action"], "deny") << d.body;
  EXPECT_EQ(denied_rule["description"], "deny: refused by the policy (403)") << d.body;
  EXPECT_TRUE(denied_rule["limit"].is_null()) << d.body;
  EXPECT_TRUE(denied_rule["remaining"].is_null()) << d.body;
  const json exempt =
      json::parse(Fetch(t.port(), "POST", "/v1/decide", {{"Content-Type", "application/json"}},
                        R"({"request": {"path": "/x", "client_ip": "10.1.2.3"}})")
                      .body);
  EXPECT_EQ(exempt["verdict"], "allow") << exempt.dump();
  EXPECT_EQ(exempt["rules"][0]["rule"], "internal") << exempt.dump();
  EXPECT_EQ(exempt["rules"][0]["action"], "allow") << exempt.dump();
  EXPECT_EQ(exempt["rules"][0]["description"], "allow: exempt, no limit; later rules not evaluated")
      << exempt.dump();

  // Per-item limits: refused without the admin token, honoured with it.
  const std::string items =
      R"({"items": [{"rule": "per-ip", "key": "k-item", "limit": {"count": 1, "period": "1h"}}]})";
  EXPECT_EQ(Fetch(t.port(), "POST", "/v1/decide", {}, items).status, 403);
  const Headers auth = {{"Authorization", "Bearer " + token}};
  HttpResponse first = Fetch(t.port(), "POST", "/v1/decide", auth, items);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(json::parse(first.body)["verdict"], "allow") << first.body;
  EXPECT_EQ(json::parse(first.body)["rules"][0]["limit"], 1) << first.body;
  EXPECT_EQ(json::parse(Fetch(t.port(), "POST", "/v1/decide", auth, items).body)["verdict"],
            "reject");
  // A bad limit is a 400 naming the field.
  HttpResponse bad = Fetch(
      t.port(), "POST", "/v1/decide", auth,
      R"({"items": [{"rule": "per-ip", "key": "k", "limit": {"count": 0, "period": "1h"}}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("items[0].limit.count"), std::string::npos) << bad.body;
}

TEST_F(ProcessTest, ServesEnvoyRateLimitServiceWhenAsked) {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  std::string rls = std::string(src ? src : ".") + "/examples/envoy/ratelimit";
  if (::access(rls.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << rls;
  Tollgated t({"--policy", policy_, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--grpc",
               "127.0.0.1:0", "--rls-config", rls},
              dir_);
  const bool started = t.WaitStarted();
  if (!started && t.Log().find("grpc not available in this build") != std::string::npos) {
    GTEST_SKIP() << "built without server/rls";
  }
  ASSERT_TRUE(started) << t.Log();
  EXPECT_NE(t.Log().find("\"grpc\":\"127.0.0.1:"), std::string::npos) << t.Log();
  auto m = Fetch(t.admin_port(), "GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("rls"), std::string::npos);  // the RLS counters are exported too
  t.Signal(SIGTERM);
  EXPECT_EQ(t.WaitExit(5s), 0) << t.Log();
}

#if TOLLGATE_TEST_GRPC
namespace rlspb = ::envoy::service::ratelimit::v3;

rlspb::RateLimitRequest RlsRequest(const std::string& key, const std::string& value) {
  rlspb::RateLimitRequest req;
  req.set_domain("api");
  auto* entry = req.add_descriptors()->add_entries();
  entry->set_key(key);
  entry->set_value(value);
  return req;
}

std::string ResponseHeader(const rlspb::RateLimitResponse& resp, std::string_view name) {
  for (const auto& h : resp.response_headers_to_add()) {
    if (EqualsIgnoreCase(h.key(), name)) return h.value();
  }
  return "<none>";
}

// Envoy's ShouldRateLimit over real gRPC through the real binary, configured by
// the JSON config's `grpc` object: OK until the limit, then OVER_LIMIT, with
// RateLimit headers in response_headers_to_add; editing only the YAML reloads it.
TEST_F(ProcessTest, ShouldRateLimitOverGrpcWithHeadersAndReloadsOnYamlChange) {
  const std::string rls_dir = dir_ + "/ratelimit";
  std::filesystem::create_directory(rls_dir);
  const std::string user_rule =
      "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {name: per-user, unit: minute, "
      "requests_per_unit: 3}\n";
  WriteFile(rls_dir + "/api.yaml", user_rule);
  WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + policy_ + R"(",
      "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 1,
      "policy_poll_interval_ms": 50,
      "grpc": {"listen": "127.0.0.1:0", "rls_config": [")" +
                                          rls_dir + R"("],
               "headers": "draft11", "default_algorithm": "token_bucket"}})");
  Tollgated t({"--config", dir_ + "/tollgated.json"}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << "log: " << t.Log() << " stdout: " << t.Stdout();
  ASSERT_GT(t.grpc_port(), 0) << t.Log();
  auto stub = rlspb::RateLimitService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(t.grpc_port()), grpc::InsecureChannelCredentials()));
  auto call = [&](const rlspb::RateLimitRequest& req, rlspb::RateLimitResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    resp->Clear();
    return stub->ShouldRateLimit(&ctx, req, resp);
  };

  const std::string user = "u" + std::to_string(::getpid());
  rlspb::RateLimitResponse resp;
  for (int i = 0; i < 3; ++i) {
    grpc::Status st = call(RlsRequest("user", user), &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.overall_code(), rlspb::RateLimitResponse::OK) << i;
    ASSERT_EQ(resp.statuses_size(), 1);
    EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(resp.statuses(0).limit_remaining(), uint32_t(2 - i));
    EXPECT_NE(ResponseHeader(resp, "RateLimit-Policy").find("per-user"), std::string::npos)
        << resp.DebugString();
    EXPECT_NE(ResponseHeader(resp, "RateLimit").find("r=" + std::to_string(2 - i)),
              std::string::npos)
        << resp.DebugString();
  }
  grpc::Status st = call(RlsRequest("user", user), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.overall_code(), rlspb::RateLimitResponse::OVER_LIMIT) << resp.DebugString();
  ASSERT_EQ(resp.statuses_size(), 1);
  EXPECT_EQ(resp.statuses(0).code(), rlspb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 0u);
  EXPECT_GE(std::atoi(ResponseHeader(resp, "Retry-After").c_str()), 1) << resp.DebugString();

  // The gRPC decisions are in the main decision metrics, labelled frontend="grpc"
  // (rule = the stats key); the HTTP histogram series keep their unlabelled shape.
  {
    auto m = Fetch(t.admin_port(), "GET", "/metrics");
    ASSERT_EQ(m.status, 200);
    EXPECT_NE(m.body.find("tollgate_decisions_total{frontend=\"grpc\",rule=\"api.user\",outcome="
                          "\"allowed\"} 3\n"),
              std::string::npos)
        << m.body;
    EXPECT_NE(m.body.find("tollgate_decisions_total{frontend=\"grpc\",rule=\"api.user\",outcome="
                          "\"rejected\"} 1\n"),
              std::string::npos)
        << m.body;
    EXPECT_NE(m.body.find("tollgate_decision_duration_seconds_count{frontend=\"grpc\"} 4\n"),
              std::string::npos)
        << m.body;
    EXPECT_NE(
        m.body.find("tollgate_decision_duration_seconds_bucket{frontend=\"grpc\",le=\"+Inf\"} 4\n"),
        std::string::npos)
        << m.body;
    EXPECT_NE(m.body.find("tollgate_decision_duration_seconds_count 0\n"), std::string::npos)
        << m.body;
    // Each call was one store call, none failed; the HTTP series stay unlabelled.
    EXPECT_NE(m.body.find("tollgate_store_calls_total{frontend=\"grpc\"} 4\n"), std::string::npos)
        << m.body;
    EXPECT_NE(m.body.find("tollgate_store_errors_total{frontend=\"grpc\"} 0\n"), std::string::npos)
        << m.body;
    EXPECT_NE(m.body.find("tollgate_store_calls_total 0\n"), std::string::npos) << m.body;
    // One family each: the gRPC samples sit inside the HTTP family's block.
    EXPECT_EQ(m.body.find("# TYPE tollgate_decisions_total"),
              m.body.rfind("# TYPE tollgate_decisions_total"));
  }

  // Only the YAML changes (the policy file does not): the poll reloads it.
  ASSERT_TRUE(call(RlsRequest("team", "t1"), &resp).ok());
  EXPECT_EQ(resp.overall_code(), rlspb::RateLimitResponse::OK);
  ASSERT_EQ(resp.statuses_size(), 1);
  EXPECT_FALSE(resp.statuses(0).has_current_limit());  // no rule for "team" yet
  WriteFile(rls_dir + "/api.yaml",
            user_rule + "  - key: team\n    rate_limit: {unit: minute, requests_per_unit: 7}\n");
  EXPECT_TRUE(WaitFor([&] {
    return call(RlsRequest("team", "t1"), &resp).ok() && resp.statuses_size() == 1 &&
           resp.statuses(0).current_limit().requests_per_unit() == 7;
  })) << t.Log();
  // The log line may come a moment after the new config serves: wait for it too.
  EXPECT_TRUE(WaitFor([&] {
    return t.Log().find("\"trigger\":\"file_changed\"") != std::string::npos;
  })) << t.Log();
  t.Signal(SIGTERM);
  EXPECT_EQ(t.WaitExit(5s), 0) << t.Log();
}

// --check compiles the rls_config YAML as the server would at start (store-aware)
// and prints every error with its file and path.
TEST_F(ProcessTest, CheckValidatesTheRlsYamlForTheConfiguredStore) {
  const std::string rls_dir = dir_ + "/ratelimit";
  std::filesystem::create_directory(rls_dir);
  WriteFile(rls_dir + "/a.yaml",
            "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, "
            "requests_per_unit: 5}\n");
  WriteFile(rls_dir + "/b.yaml",
            "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
            "requests_per_unit: 5, algorithm: sliding_log}\n");
  {
    // Local store: sliding_log is fine, only a.yaml's unit is wrong.
    Tollgated t({"--policy", policy_, "--grpc", "127.0.0.1:0", "--rls-config", rls_dir, "--check"},
                dir_);
    EXPECT_EQ(t.WaitExit(5s), 2) << t.Log();
    EXPECT_NE(t.Log().find("a.yaml"), std::string::npos) << t.Log();
    EXPECT_NE(t.Log().find("descriptors[0].rate_limit.unit"), std::string::npos) << t.Log();
    EXPECT_EQ(t.Log().find("sliding_log"), std::string::npos) << t.Log();
  }
  {
    // Redis: sliding_log is refused too (no connection is made by --check).
    Tollgated t({"--policy", policy_, "--grpc", "127.0.0.1:0", "--rls-config", rls_dir, "--store",
                 "redis://127.0.0.1:1", "--check"},
                dir_);
    EXPECT_EQ(t.WaitExit(5s), 2) << t.Log();
    EXPECT_NE(t.Log().find("descriptors[0].rate_limit.unit"), std::string::npos) << t.Log();
    EXPECT_NE(t.Log().find("b.yaml"), std::string::npos) << t.Log();
    EXPECT_NE(t.Log().find("descriptors[0].rate_limit.algorithm: sliding_log is not supported by "
                           "the redis store"),
              std::string::npos)
        << t.Log();
  }
  {
    WriteFile(rls_dir + "/a.yaml",
              "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
              "requests_per_unit: 5}\n");
    Tollgated t({"--policy", policy_, "--grpc", "127.0.0.1:0", "--rls-config", rls_dir, "--check"},
                dir_);
    EXPECT_EQ(t.WaitExit(5s), 0) << t.Log();
    EXPECT_NE(t.Stdout().find("rls_config are valid"), std::string::npos) << t.Stdout();
  }
}

TEST_F(ProcessTest, GrpcFlagsAreValidated) {
  Tollgated t({"--policy", policy_, "--grpc", "127.0.0.1:0", "--rls-config", dir_, "--grpc-headers",
               "fancy", "--rls-default-algorithm", "gcra"},
              dir_);
  EXPECT_EQ(t.WaitExit(5s), 2);
  EXPECT_NE(t.Log().find("grpc.headers: unknown style"), std::string::npos) << t.Log();
  EXPECT_NE(t.Log().find("grpc.default_algorithm: unknown algorithm"), std::string::npos)
      << t.Log();
}
#endif

// A non-loopback admin listener needs a token; token files are strict, and a
// CRLF file is read alike through the flag and the config file.
TEST_F(ProcessTest, AdminTokenIsRequiredOffLoopbackAndTokenFilesAreStrict) {
  {
    Tollgated t({"--policy", policy_, "--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0"}, dir_);
    EXPECT_EQ(t.WaitExit(10s), 2) << t.Log();
    EXPECT_NE(t.Log().find("admin.token_file: is required: admin.listen (0.0.0.0:0) is not a "
                           "loopback address"),
              std::string::npos)
        << t.Log();
  }
  const std::string token = "tok-" + std::to_string(::getpid()) + "-0123456789abcdef";
  WriteFile(dir_ + "/crlf.token", token + "\r\n");
  WriteFile(dir_ + "/blank.token", "\n" + token + "\n");
  WriteFile(dir_ + "/flag.json",
            R"({"policy": ")" + policy_ +
                R"(", "listen": "127.0.0.1:0", "admin": {"listen": "0.0.0.0:0", "token_file": ")" +
                dir_ + R"(/crlf.token"}, "threads": 1})");
  for (bool through_flag : {true, false}) {
    SCOPED_TRACE(through_flag ? "flag" : "config file");
    std::vector<std::string> args =
        through_flag
            ? std::vector<std::string>{"--policy",          policy_,   "--listen",
                                       "127.0.0.1:0",       "--admin", "0.0.0.0:0",
                                       "--threads",         "1",       "--admin-token-file",
                                       dir_ + "/crlf.token"}
            : std::vector<std::string>{"--config", dir_ + "/flag.json"};
    {
      Tollgated t(args, dir_);
      ASSERT_TRUE(t.WaitStarted()) << t.Log();
      EXPECT_EQ(Fetch(t.admin_port(), "GET", "/v1/policy").status, 401);
      EXPECT_EQ(
          Fetch(t.admin_port(), "GET", "/v1/policy", {{"Authorization", "Bearer " + token + "x"}})
              .status,
          401);
      EXPECT_EQ(
          Fetch(t.admin_port(), "GET", "/v1/policy", {{"Authorization", "Bearer " + token}}).status,
          200);
      t.Signal(SIGTERM);
      EXPECT_EQ(t.WaitExit(10s), 0) << t.Log();
    }
    // A blank first line used to disable auth silently: now it stops the start.
    if (through_flag) {
      args.back() = dir_ + "/blank.token";
    } else {
      WriteFile(dir_ + "/blank.json",
                R"({"policy": ")" + policy_ +
                    R"(", "admin": {"listen": "127.0.0.1:0", "token_file": ")" + dir_ +
                    R"(/blank.token"}})");
      args = {"--config", dir_ + "/blank.json"};
    }
    Tollgated t(args, dir_);
    EXPECT_EQ(t.WaitExit(10s), 2) << t.Log();
    EXPECT_NE(t.Log().find(dir_ + "/blank.token: the first line is blank"), std::string::npos)
        << t.Log();
  }
}

// --check runs exactly the validation a start runs: each bad config below is
// refused by both, with the same exit code and the same messages.
TEST_F(ProcessTest, CheckRefusesExactlyWhatStartupRefusesWithTheSameMessages) {
  WriteFile(dir_ + "/bad-policy.json", R"({"rules": [{"name": "x", "algorithm": "nope"}]})");
  WriteFile(dir_ + "/blank.token", "\n0123456789abcdef-token\n");
  auto config = [&](const std::string& name, const std::string& fields) {
    WriteFile(dir_ + "/" + name + ".json", R"({"policy": ")" + policy_ +
                                               R"(", "listen": "127.0.0.1:0", "threads": 1, )" +
                                               fields + "}");
    return std::vector<std::string>{"--config", dir_ + "/" + name + ".json"};
  };
  struct Case {
    std::string name;
    std::vector<std::string> args;
    std::string expected;  // in the output of both runs
  };
  const std::vector<std::string> base = {"--policy",    policy_,   "--listen",
                                         "127.0.0.1:0", "--admin", "127.0.0.1:0"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::vector<Case> cases = {
      {"trusted-proxy-cidr",
       config("cidr", R"("admin": "127.0.0.1:0", "trusted_proxies": ["10.0.0.1", "10.0.0.0/33"])"),
       "trusted_proxies[1]: '10.0.0.0/33' is not an address or CIDR"},
      {"admin-exposed-without-token",
       {"--policy", policy_, "--listen", "127.0.0.1:0", "--admin", "0.0.0.0:0"},
       "admin.token_file: is required"},
      {"admin-token-short",
       config("short", R"("admin": {"listen": "127.0.0.1:0", "token": "short"})"),
       "admin.token: the token is 5 bytes"},
      {"admin-token-file-blank", with({"--admin-token-file", dir_ + "/blank.token"}),
       "the first line is blank"},
      {"policy",
       {"--policy", dir_ + "/bad-policy.json", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"},
       dir_ + "/bad-policy.json: rules[0]"},
      {"store-url", with({"--store", "redis://a%zz@127.0.0.1:6379"}), "store: "},
      {"jwt-key",
       config("jwt", R"("admin": "127.0.0.1:0", "jwt": {"rs256_public_key_pem": "nope"})"),
       "jwt.rs256_public_key_pem: "},
      {"log-level", with({"--log-level", "loud"}), "log.level: must be"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> check_args = c.args;
    check_args.push_back("--check");
    Tollgated check(check_args, dir_);
    const int check_exit = check.WaitExit(10s);
    const std::string check_log = check.Log();
    Tollgated start(c.args, dir_);
    const int start_exit = start.WaitExit(10s);
    const std::string start_log = start.Log();
    EXPECT_EQ(check_exit, 2) << check_log;
    EXPECT_EQ(start_exit, 2) << start_log;
    EXPECT_EQ(check_log, start_log);
    EXPECT_NE(check_log.find(c.expected), std::string::npos) << check_log;
    // `tollgate check-config --server FILE` prints the same errors, one a line.
    const std::string cli = Binary().substr(0, Binary().rfind("/server/")) + "/tools/tollgate";
    if (c.args[0] != "--config" || ::access(cli.c_str(), X_OK) != 0) continue;
    FILE* p = ::popen((cli + " check-config --server " + c.args[1] + " 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string cli_out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) cli_out.append(buf, n);
    const int status = ::pclose(p);
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2) << cli_out;
    std::string expected_lines;
    std::istringstream lines(check_log);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("  ")) expected_lines += line.substr(2) + "\n";
    }
    EXPECT_EQ(cli_out, expected_lines);
  }
}

// A password in a peer's URL (store, etcd policy source, collector) never
// reaches --check, start-up or `tollgate check-config --server`, whatever
// part of the URL is wrong; and a store that cannot be reached is logged and
// shown (/readyz) by host and port only.
TEST_F(ProcessTest, StoreUrlPasswordsNeverReachCheckOrStartErrors) {
  const std::string cli = Binary().substr(0, Binary().rfind("/server/")) + "/tools/tollgate";
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"unknown-scheme", R"("store": "reddis://:s3cret@10.0.0.1:6379")"},
      {"no-host", R"("store": "redis://:s3cret@")"},
      {"raw-slash", R"("store": "redis://:s3/cret@10.0.0.1:99999")"},
      {"option", R"("store": "rediss://bob:s3cret@10.0.0.1?password=s3cret")"},
      {"cluster-seed", R"("store": "redis-cluster://:s3cret@10.0.0.1:7000,10.0.0.2:x")"},
      {"sentinel-master",
       R"("store": "redis-sentinel://:s3cret@10.0.0.1:26379/bad{name}?master_password=s3cret")"},
      {"sentinel-port",
       R"("store": "redis-sentinel://:s3cret@10.0.0.1:26379,10.0.0.2/m?master_password=s3cret")"},
      {"sentinel-tls", R"("store": "rediss-sentinel://:s3cret@10.0.0.1:26379/m?tls_server_name=")"},
      {"etcd-userinfo", ""},  // the policy below
      {"collector", R"("tracing": {"endpoint": "https://u:s3cret@collector:4318/v1/traces"})"},
  };
  for (const auto& [name, field] : fields) {
    SCOPED_TRACE(name);
    const std::string policy =
        name == "etcd-userinfo" ? "etcd://root:s3cret@127.0.0.1:2379/tollgate/policy" : policy_;
    const std::string path = dir_ + "/" + name + ".json";
    WriteFile(path, R"({"policy": ")" + policy + R"(", "listen": "127.0.0.1:0", "threads": 1)" +
                        (field.empty() ? "" : ", " + field) + "}");
    for (bool check : {true, false}) {
      std::vector<std::string> args = {"--config", path};
      if (check) args.push_back("--check");
      Tollgated t(args, dir_);
      EXPECT_EQ(t.WaitExit(10s), 2) << t.Log();
      EXPECT_EQ(t.Log().find("s3"), std::string::npos) << t.Log();
      EXPECT_EQ(t.Log().find("cret"), std::string::npos) << t.Log();
    }
    if (::access(cli.c_str(), X_OK) != 0) continue;
    FILE* p = ::popen((cli + " check-config --server " + path + " 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string cli_out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) cli_out.append(buf, n);
    const int status = ::pclose(p);
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2) << cli_out;
    EXPECT_EQ(cli_out.find("s3"), std::string::npos) << cli_out;
    EXPECT_EQ(cli_out.find("cret"), std::string::npos) << cli_out;
  }
  // A good URL whose Redis is not there: started, logged and shown without the password.
  Tollgated t({"--policy", policy_, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--store",
               "redis://bob:s3cret@127.0.0.1:1?connect_timeout_ms=50"},
              dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  const HttpResponse ready = Fetch(t.admin_port(), "GET", "/readyz");
  EXPECT_NE(ready.body.find("127.0.0.1:1"), std::string::npos) << ready.body;
  EXPECT_EQ(ready.body.find("s3cret"), std::string::npos) << ready.body;
  EXPECT_EQ(t.Log().find("s3cret"), std::string::npos) << t.Log();
  // The same for Sentinel (--store, the same grammar): neither the sentinels'
  // password nor the master's, whose sentinels are not there. Its own directory: the
  // first tollgated still runs and writes its log (and its "started" line) in dir_.
  ScopedTempDir sentinel_dir;
  Tollgated sentinel(
      {"--policy", policy_, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--store",
       "redis-sentinel://:s3cret@127.0.0.1:1/m?master_password=s3cret&"
       "connect_timeout_ms=50"},
      sentinel_dir.path());
  ASSERT_TRUE(sentinel.WaitStarted()) << sentinel.Log();
  const HttpResponse sentinel_ready = Fetch(sentinel.admin_port(), "GET", "/readyz");
  EXPECT_NE(sentinel_ready.body.find("redis-sentinel master 'm' via 127.0.0.1:1"),
            std::string::npos)
      << sentinel_ready.body;
  EXPECT_EQ(sentinel_ready.body.find("s3cret"), std::string::npos) << sentinel_ready.body;
  EXPECT_EQ(sentinel.Log().find("s3cret"), std::string::npos) << sentinel.Log();
}

// Hostile bytes a client can put in a header (Beast lets obs-text and HTAB
// through) reach the rejection log only escaped: the log line holds no control,
// C1 or bidi character, and the escaped field decodes back to what was sent.
TEST_F(ProcessTest, LogLinesEscapeControlC1AndBidiCharactersFromRequests) {
  WriteFile(policy_, R"({"rules": [{"name": "all", "limit_keys": ["ip:address"],
      "algorithm": "fixed_window", "algorithm_config": {"burst": 1, "window": "1h"}}]})");
  WriteFile(dir_ + "/log.json", R"({"policy": ")" + policy_ +
                                    R"(", "listen": "127.0.0.1:0", "admin": "127.0.0.1:0",
      "threads": 1, "log": {"reject_sample": 1, "access_log": true}})");
  Tollgated t({"--config", dir_ + "/log.json"}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  // X-Original-URI is normalised as the gateway's target (control bytes refused, other bytes
  // percent-encoded), so the hostile bytes ride in X-Original-Method, which is logged as sent.
  const std::string hostile =
      "GET\t\x9b\xc2\x9b[2J\xe2\x80\xae\x67\x6e\x70\x2e\xe2\x81\xa6\xe2\x80\x8f\xd8\x9c\\x41\xff";
  Headers h = {{"X-Original-URI", "/api/x"}, {"X-Original-Method", hostile}};
  EXPECT_EQ(Fetch(t.port(), "GET", "/v1/auth", h).status, 204);
  EXPECT_EQ(Fetch(t.port(), "GET", "/v1/auth", h).status, 403);
  std::string line;
  ASSERT_TRUE(WaitFor([&] {
    std::istringstream lines(t.Log());
    while (std::getline(lines, line)) {
      if (line.find("\"msg\":\"rejected\"") != std::string::npos) return true;
    }
    return false;
  })) << t.Log();
  for (size_t i = 0; i < line.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    ASSERT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << i << " of " << line;
  }
  json j = json::parse(line);
  const std::string path = j["method"];
  EXPECT_EQ(UnescapeLogText(path), hostile) << path;
  EXPECT_NE(path.find("\\u202e"), std::string::npos) << path;
  EXPECT_NE(path.find("\\u009b"), std::string::npos) << path;
  EXPECT_NE(path.find("\\x9b"), std::string::npos) << path;
  t.Signal(SIGTERM);
  EXPECT_EQ(t.WaitExit(10s), 0) << t.Log();
}

TEST_F(ProcessTest, HelpExplainsFlagsAndBadConfigExits2) {
  {
    Tollgated t({"--help"}, dir_);
    EXPECT_EQ(t.WaitExit(5s), 0);
    std::string out = t.Stdout();
    for (const char* flag : {"--policy", "--listen", "--admin", "--store", "--failure-mode",
                             "--config", "redis-cluster://"}) {
      EXPECT_NE(out.find(flag), std::string::npos) << flag;
    }
  }
  {
    Tollgated t({"--policy", policy_, "--store", "memcached://x"}, dir_);
    EXPECT_EQ(t.WaitExit(5s), 2);
    EXPECT_NE(t.Log().find("store"), std::string::npos);
  }
  {
    WriteFile(dir_ + "/bad.json", R"({"listen": 5, "nope": 1})");
    Tollgated t({"--config", dir_ + "/bad.json"}, dir_);
    EXPECT_EQ(t.WaitExit(5s), 2);
    EXPECT_NE(t.Log().find("nope: unknown field"), std::string::npos) << t.Log();
  }
  {
    WriteFile(dir_ + "/broken-policy.json", R"({"rules": [{"name": 1}]})");
    Tollgated t({"--policy", dir_ + "/broken-policy.json", "--check"}, dir_);
    EXPECT_EQ(t.WaitExit(5s), 2);
  }
}

}  // namespace
}  // namespace tollgate::testing
