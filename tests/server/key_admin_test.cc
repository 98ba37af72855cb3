// Key administration end to end (server/key_admin.h): a tollgated gateway in
// process on free loopback ports, in front of a test upstream, on the local
// store and on a real redis-server (through the resilient store tollgated
// wraps it in). Requests go to the main listener, key actions to the admin
// listener with its token, and `tollgate key` runs as a program.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "server/log.h"
#include "server/server_fixture.h"
#include "server/test_http.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#include "testing/test_paths.h"
#endif

namespace tollgate::testing {
namespace {

using json = nlohmann::json;

constexpr char kToken[] = "key-admin-token-0123";

// The token, and the JSON media type the admin listener requires of a JSON body.
Headers Admin() {
  return {{"Authorization", std::string("Bearer ") + kToken}, {"Content-Type", "application/json"}};
}

json Body(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.body;
  return j;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The key_admin audit lines of a JSON-lines log.
std::vector<json> AuditLines(const std::string& path) {
  std::vector<json> out;
  std::istringstream lines(ReadAll(path));
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("msg", "") == "key_admin") out.push_back(j);
  }
  return out;
}

// Runs `tollgate key ARGS` with `env` ("NAME=value ..." prefixes); stdout and stderr.
std::string RunCli(const std::string& env, const std::string& args, int* status) {
  std::string out;
  *status = -1;
  const std::string cli = tollgate::testing::ProgramPath("TOLLGATE_CLI_PATH");
  FILE* p = popen((env + cli + " key " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *status = pclose(p);
  return out;
}

class KeyAdmin : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    server::ServerConfig c = TestServer::DefaultConfig();
    if (GetParam() == "redis") {
#if TOLLGATE_TEST_REDIS
      redis_ = RedisServer::Start();
      if (redis_.missing) GTEST_SKIP() << redis_.error;
      ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
      c.store = redis_->url();
#else
      GTEST_SKIP() << "the Redis store is not part of this build";
#endif
    }
    c.admin_token = kToken;
    c.upstream = "http://127.0.0.1:" + std::to_string(upstream_.port());
    log_path_ = log_dir_.File("log.jsonl");
    auto log = server::Logger::Create(server::LogLevel::kInfo, log_path_);
    ASSERT_TRUE(log.ok());
    log_ = std::move(log).value();
    std::string error;
    s_ = TestServer::Start(c, TightPolicy(), &error, log_);
    ASSERT_TRUE(s_) << error;
  }

  // A customer's request through the gateway: 200 from upstream, or 429.
  int Call(const std::string& api_key) {
    return Fetch(s_->port, "GET", "/anything", {{"X-Api-Key", api_key}}).status;
  }
  HttpResponse Action(const std::string& action, const json& body, const Headers& h = Admin()) {
    return Fetch(s_->admin_port, "POST", "/v1/keys/" + action, h, body.dump());
  }
  HttpResponse Action(const std::string& action, const std::string& raw_body) {
    return Fetch(s_->admin_port, "POST", "/v1/keys/" + action, Admin(), raw_body);
  }
  // A key unique to the test (Redis keeps state across tests).
  std::string Key() const {
    return std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
           std::to_string(::getpid());
  }

  TestUpstream upstream_;
  ScopedTempDir log_dir_;
  std::string log_path_;
  std::shared_ptr<server::Logger> log_;
  std::unique_ptr<TestServer> s_;
#if TOLLGATE_TEST_REDIS
  RedisServer::StartResult redis_;
#endif
};

TEST_P(KeyAdmin, ResetUnblocksARateLimitedCustomer) {
  const std::string k = Key();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Call(k), 200) << i;
  ASSERT_EQ(Call(k), 429);

  HttpResponse got = Action("get", {{"rule", "keyed"}, {"values", {k}}});
  ASSERT_EQ(got.status, 200) << got.body;
  json g = Body(got);
  EXPECT_EQ(g["algorithm"], "token_bucket");
  EXPECT_EQ(g["before"]["remaining"], 0);
  EXPECT_EQ(g["before"]["limit"], 3);
  EXPECT_EQ(g["before"]["used"], 3);
  EXPECT_GT(g["before"]["reset_after_ms"].get<int64_t>(), 0);
  EXPECT_FALSE(g.contains("after"));
  // The answer shows the identity hashed, as every admin view does by default.
  EXPECT_EQ(g["key"].get<std::string>().rfind("hmac:", 0), 0u) << g;

  HttpResponse reset = Action("reset", {{"rule", "keyed"}, {"values", {k}}});
  ASSERT_EQ(reset.status, 200) << reset.body;
  json r = Body(reset);
  EXPECT_EQ(r["before"]["remaining"], 0);
  EXPECT_EQ(r["after"]["remaining"], 3);
  EXPECT_EQ(r["after"]["used"], 0);
  EXPECT_EQ(Call(k), 200);  // unblocked

  // Audit: who, what, rule, key (redacted), before and after.
  log_->Flush();
  std::vector<json> audit = AuditLines(log_path_);
  ASSERT_EQ(audit.size(), 2u) << ReadAll(log_path_);
  EXPECT_EQ(audit[0]["action"], "get");
  const json& a = audit[1];
  EXPECT_EQ(a["action"], "reset");
  EXPECT_EQ(a["result"], "ok");
  EXPECT_EQ(a["rule"], "keyed");
  EXPECT_EQ(a["actor"], "127.0.0.1");
  EXPECT_EQ(a["token"], "admin");  // the token's name (the legacy one is "admin"), never its value
  EXPECT_EQ(a["key"], g["key"]);
  EXPECT_EQ(a["before"]["remaining"], 0);
  EXPECT_EQ(a["after"]["remaining"], 3);
  EXPECT_EQ(ReadAll(log_path_).find(k), std::string::npos) << "the raw key reached the log";

  HttpResponse metrics = Fetch(s_->admin_port, "GET", "/metrics", Admin());
  EXPECT_NE(metrics.body.find("tollgate_admin_key_actions_total{action=\"reset\",result=\"ok\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("tollgate_admin_key_actions_total{action=\"get\",result=\"ok\"} 1"),
            std::string::npos);
}

TEST_P(KeyAdmin, SetRemainingZeroGivesA429AndSetRaisesIt) {
  const std::string k = Key();
  ASSERT_EQ(Call(k), 200);
  HttpResponse set = Action("set", {{"rule", "keyed"}, {"values", {k}}, {"remaining", 0}});
  ASSERT_EQ(set.status, 200) << set.body;
  json s = Body(set);
  EXPECT_EQ(s["before"]["remaining"], 2);
  EXPECT_EQ(s["after"]["remaining"], 0);
  HttpResponse denied = Fetch(s_->port, "GET", "/anything", {{"X-Api-Key", k}});
  EXPECT_EQ(denied.status, 429);
  EXPECT_TRUE(denied.Has("retry-after"));

  // By source instead of in order; two tokens, then a 429 again.
  set = Action("set", {{"rule", "keyed"}, {"keys", {{"header:x-api-key", k}}}, {"remaining", 2}});
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(Body(set)["after"]["remaining"], 2);
  EXPECT_EQ(Call(k), 200);
  EXPECT_EQ(Call(k), 200);
  EXPECT_EQ(Call(k), 429);
  // Other customers never noticed.
  EXPECT_EQ(Call(k + "-other"), 200);
}

TEST_P(KeyAdmin, NeedsTheAdminToken) {
  const json body = {{"rule", "keyed"}, {"values", {Key()}}};
  for (const std::string action : {"get", "reset", "set"}) {
    HttpResponse none = Action(action, body, {});
    EXPECT_EQ(none.status, 401) << action;
    HttpResponse wrong = Action(action, body, {{"Authorization", "Bearer not-the-token"}});
    EXPECT_EQ(wrong.status, 401) << action;
  }
  // Not on the main listener at all: there it is a gateway path.
  EXPECT_EQ(upstream_.requests(), 0);
  HttpResponse main = Fetch(s_->port, "POST", "/v1/keys/reset", Admin(), body.dump());
  EXPECT_EQ(upstream_.requests(), 1) << main.status;
  // Only POST.
  HttpResponse get = Fetch(s_->admin_port, "GET", "/v1/keys/get", Admin());
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.Header("allow"), "POST");
}

TEST_P(KeyAdmin, UnknownRuleIs404Problem) {
  HttpResponse r = Action("reset", {{"rule", "no-such-rule"}, {"values", {"k"}}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  EXPECT_NE(Body(r)["detail"].get<std::string>().find("no-such-rule"), std::string::npos);
  HttpResponse metrics = Fetch(s_->admin_port, "GET", "/metrics", Admin());
  EXPECT_NE(
      metrics.body.find("tollgate_admin_key_actions_total{action=\"reset\",result=\"error\"} 1"),
      std::string::npos);
}

// Each hostile body is a 400 problem naming the field, and nothing changes.
TEST_P(KeyAdmin, HostileInputIs400NamingTheField) {
  const std::string k = Key();
  ASSERT_EQ(Call(k), 200);
  struct Case {
    std::string action;
    std::string body;
    std::string path;  // the error's path
  };
  const std::string huge(10000, 'x');  // over the 4096 bytes a value may have
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  const std::vector<Case> cases = {
      {"get", json{{"rule", "keyed"}, {"values", {huge}}}.dump(), "values[0]"},
      {"set", json{{"rule", "keyed"}, {"values", {k}}, {"remaining", "two"}}.dump(), "remaining"},
      {"set", json{{"rule", "keyed"}, {"values", {k}}, {"remaining", 1.5}}.dump(), "remaining"},
      {"set", json{{"rule", "keyed"}, {"values", {k}}, {"remaining", -1}}.dump(), "remaining"},
      {"set", json{{"rule", "keyed"}, {"values", {k}}, {"remaining", 4}}.dump(), "remaining"},
      {"set", R"({"rule":"keyed","values":["k"],"remaining":1e300})", "remaining"},
      {"set", R"({"rule":"keyed","values":["k"],"remaining":18446744073709551615})", "remaining"},
      {"set", json{{"rule", "keyed"}, {"values", {k}}}.dump(), "remaining"},
      {"reset", json{{"rule", "keyed"}, {"values", {k}}, {"remaining", 1}}.dump(), "remaining"},
      {"reset", json{{"rule", "keyed"}, {"values", {k, "extra"}}}.dump(), "values"},
      {"reset", json{{"rule", "keyed"}, {"values", {1}}}.dump(), "values[0]"},
      {"reset", json{{"rule", "keyed"}, {"values", json::array()}}.dump(), "values"},
      {"reset", json{{"rule", "keyed"}, {"keys", {{"header:x-other", k}}}}.dump(),
       "keys.header:x-other"},
      {"reset", json{{"rule", std::string(1000, 'r')}, {"values", {k}}}.dump(), "rule"},
      {"reset", json{{"rule", 7}, {"values", {k}}}.dump(), "rule"},
      {"reset", json{{"values", {k}}}.dump(), "rule"},
      {"reset", json{{"rule", "keyed"}}.dump(), "values"},
      {"reset", "not json", ""},
      {"reset", "[1,2]", ""},
      {"reset", deep, ""},
      {"reset", "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.action + " " + c.body.substr(0, 120));
    HttpResponse r = Action(c.action, c.body);
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
    EXPECT_EQ(r.Header("content-type"), "application/problem+json");
    json j = Body(r);
    bool named = false;
    for (const json& e : j.value("errors", json::array())) named |= e.value("path", "?") == c.path;
    EXPECT_TRUE(named) << r.body.substr(0, 300);
    EXPECT_LT(r.body.size(), 4000u) << "the answer echoes hostile input";
  }
  // A body over max_body_bytes never reaches the handler.
  EXPECT_EQ(
      Action("get", json{{"rule", "keyed"}, {"values", {std::string(100000, 'x')}}}.dump()).status,
      413);
  HttpResponse got = Action("get", {{"rule", "keyed"}, {"values", {k}}});
  EXPECT_EQ(Body(got)["before"]["remaining"], 2);  // unchanged
}

// `tollgate key` as an operator runs it: the admin URL and token from the environment.
TEST_P(KeyAdmin, CliGetResetSet) {
  if (tollgate::testing::ProgramPath("TOLLGATE_CLI_PATH").empty()) {
    GTEST_SKIP() << "the CLI is not part of this build";
  }
  const std::string k = Key();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Call(k), 200);
  ASSERT_EQ(Call(k), 429);
  const std::string env = "TOLLGATE_ADMIN_URL=http://127.0.0.1:" + std::to_string(s_->admin_port) +
                          " TOLLGATE_ADMIN_TOKEN=" + kToken + " ";
  auto run = [&](const std::string& args, int* status) { return RunCli(env, args, status); };
  int status = -1;
  std::string out = run("get --rule keyed --value " + k, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(json::parse(out, nullptr, false)["before"]["remaining"], 0) << out;
  out = run("reset --rule keyed --key header:x-api-key=" + k, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(Call(k), 200);
  out = run("set --rule keyed --value " + k + " --remaining 0", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(Call(k), 429);
  // Clear errors: the field the server refused, an unknown rule, no token, nobody listening.
  out = run("set --rule keyed --value " + k + " --remaining 9", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("400"), std::string::npos) << out;
  EXPECT_NE(out.find("remaining: must be 0..3"), std::string::npos) << out;
  out = run("get --rule nope --value " + k, &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("404"), std::string::npos) << out;
  std::string no_token =
      RunCli("TOLLGATE_ADMIN_URL=http://127.0.0.1:" + std::to_string(s_->admin_port) + " ",
             "get --rule keyed --value x", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(no_token.find("401"), std::string::npos) << no_token;
  EXPECT_NE(no_token.find("TOLLGATE_ADMIN_TOKEN"), std::string::npos) << no_token;
  out = run("get --rule keyed --value x --admin-url http://127.0.0.1:1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("cannot reach"), std::string::npos) << out;
  out = run("set --rule keyed --value x --remaining lots", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--remaining wants a whole number"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Stores, KeyAdmin, ::testing::Values("local", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tollgate::testing
