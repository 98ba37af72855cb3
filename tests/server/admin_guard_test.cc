// The admin listener against a web page (issue 29, finding 3), tollgated in
// process on free loopback ports: a browser's simple cross-site request (its
// exact headers: Origin, Content-Type text/plain, Sec-Fetch-Site) and a
// DNS-rebound page's requests (Host: evil.example) are refused and change
// nothing (no rule in shadow, no key touched, no policy written or
// reloaded); the requests curl, the CLI and an operator's own page send still
// work. Also (finding 7): the public /readyz says only whether the instance
// is ready, and key administration waits on a stalled store off the worker,
// so the worker's decisions go on meanwhile.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "server/server_fixture.h"
#include "server/test_http.h"
#if TOLLGATE_TEST_HOSTILE_REDIS
#include "testing/hostile_redis.h"
#endif

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json Body(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  EXPECT_TRUE(j.is_object()) << r.status << " " << r.body;
  return j.is_object() ? j : json::object();
}

// What a browser sends with a page's simple cross-site POST (a form, or fetch
// with mode "no-cors") to `host`.
Headers Page(const std::string& host) {
  return {{"Host", host},
          {"Origin", "http://evil.example"},
          {"Content-Type", "text/plain"},
          {"Sec-Fetch-Site", "cross-site"}};
}

// One state-changing admin request, as a page would send it.
struct Action {
  std::string method;
  std::string target;
  std::string body;
};

std::vector<Action> StateChangingActions() {
  return {{"POST", "/v1/rollback/trip?rule=keyed", ""},
          {"POST", "/v1/rollback/trip?rule=keyed", "x"},
          {"POST", "/v1/keys/reset", R"({"rule": "keyed", "values": ["victim"]})"},
          {"POST", "/v1/keys/set", R"({"rule": "keyed", "values": ["victim"], "remaining": 3})"},
          {"PUT", "/v1/policy", GenerousPolicy(1000000)},
          {"POST", "/v1/reload", ""}};
}

class AdminGuard : public ::testing::Test {
 protected:
  void Start(server::ServerConfig c = TestServer::DefaultConfig()) {
    std::string error;
    s_ = TestServer::Start(c, TightPolicy(), &error);
    ASSERT_TRUE(s_) << error;
  }
  // What curl or the CLI sends: the listener's address as Host, a JSON media type.
  Headers Curl() const {
    return {{"Host", "127.0.0.1:" + std::to_string(s_->admin_port)},
            {"Content-Type", "application/json"}};
  }
  HttpResponse Admin(const std::string& method, const std::string& target, const Headers& headers,
                     const std::string& body = "") const {
    return Fetch(s_->admin_port, method, target, headers, body);
  }
  bool Tripped() const {
    const json view = Body(Admin("GET", "/v1/rollback", Curl()));
    for (const json& r : view.value("rules", json::array())) {
      if (r["rule"] == "keyed") return r["tripped"].get<bool>();
    }
    ADD_FAILURE() << "no rule keyed in /v1/rollback";
    return false;
  }
  int64_t Remaining(const std::string& key) const {
    const json got = Body(
        Admin("POST", "/v1/keys/get", Curl(), json{{"rule", "keyed"}, {"values", {key}}}.dump()));
    return got.contains("before") ? got["before"]["remaining"].get<int64_t>() : -1;
  }
  int64_t Generation() const {
    return Body(Admin("GET", "/v1/policy", Curl())).value("generation", int64_t{-1});
  }
  int Auth(const std::string& key) const {
    return Fetch(s_->port, "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Api-Key", key}}).status;
  }
  // Spends the victim's 3 tokens: its next request is refused.
  void DrainVictim() const {
    for (int i = 0; i < 3; ++i) ASSERT_EQ(Auth("victim"), 204) << i;
    ASSERT_EQ(Auth("victim"), 403);
    ASSERT_EQ(Remaining("victim"), 0);
  }
  // Nothing the actions would change has changed.
  void ExpectUnchanged(int64_t generation) const {
    EXPECT_FALSE(Tripped()) << "the rule went to shadow";
    EXPECT_EQ(Remaining("victim"), 0) << "the key was reset or set";
    EXPECT_EQ(Auth("victim"), 403) << "the victim's limit no longer holds";
    EXPECT_EQ(Generation(), generation) << "the policy was written or reloaded";
    EXPECT_EQ(ReadAll(s_->policy_path), TightPolicy()) << "the policy file was written";
  }

  std::unique_ptr<TestServer> s_;
};

// The issue's repro: the browser's exact simple-request headers, with the
// page's own name as Host (its request reached the loopback listener).
TEST_F(AdminGuard, ABrowsersSimpleCrossSiteRequestChangesNothing) {
  Start();
  DrainVictim();
  const int64_t generation = Generation();
  for (const Action& a : StateChangingActions()) {
    const HttpResponse r = Admin(a.method, a.target, Page("evil.example"), a.body);
    EXPECT_EQ(r.status, 421) << a.method << " " << a.target << ": " << r.body;
    EXPECT_EQ(r.Header("content-type"), "application/problem+json");
    EXPECT_NE(r.body.find("DNS rebinding"), std::string::npos) << r.body;
  }
  ExpectUnchanged(generation);
}

// A page's form or no-cors fetch to http://127.0.0.1:PORT/ (Host is the
// listener's address): refused by Sec-Fetch-Site, by Origin, or by the media
// type, whichever the browser sends.
TEST_F(AdminGuard, ACrossSiteRequestToTheLoopbackAddressChangesNothing) {
  Start();
  DrainVictim();
  const int64_t generation = Generation();
  const std::string host = "127.0.0.1:" + std::to_string(s_->admin_port);
  const std::vector<std::pair<std::string, Headers>> browsers = {
      {"a current browser", Page(host)},
      {"no Sec-Fetch-Site",
       {{"Host", host}, {"Origin", "http://evil.example"}, {"Content-Type", "text/plain"}}},
      {"same-site page",
       {{"Host", host},
        {"Sec-Fetch-Site", "same-site"},
        {"Content-Type", "application/x-www-form-urlencoded"}}},
      {"sandboxed page",
       {{"Host", host}, {"Origin", "null"}, {"Content-Type", "multipart/form-data; boundary=x"}}},
      {"an origin on another port",
       {{"Host", host}, {"Origin", "http://127.0.0.1:1"}, {"Content-Type", "application/json"}}},
      {"neither Origin nor Sec-Fetch-Site", {{"Host", host}, {"Content-Type", "text/plain"}}},
  };
  for (const auto& [who, headers] : browsers) {
    for (const Action& a : StateChangingActions()) {
      const HttpResponse r = Admin(a.method, a.target, headers, a.body);
      EXPECT_TRUE(r.status == 403 || r.status == 415)
          << who << ": " << a.method << " " << a.target << ": " << r.status << " " << r.body;
      EXPECT_NE(r.body.find("Admin request refused"), std::string::npos) << r.body;
    }
  }
  // A JSON endpoint names the media type it needs.
  const HttpResponse typed =
      Admin("POST", "/v1/keys/reset", {{"Host", host}, {"Content-Type", "text/plain"}},
            StateChangingActions()[2].body);
  EXPECT_EQ(typed.status, 415) << typed.body;
  EXPECT_NE(typed.body.find("application/json"), std::string::npos) << typed.body;
  ExpectUnchanged(generation);
}

// DNS rebinding: the page's own origin, same-origin headers, even the JSON
// media type, but Host is the page's name: refused, reads included.
TEST_F(AdminGuard, DnsRebindingIsRefusedForReadsAndWrites) {
  Start();
  DrainVictim();
  const int64_t generation = Generation();
  const std::string rebound = "evil.example:" + std::to_string(s_->admin_port);
  const Headers page = {{"Host", rebound},
                        {"Origin", "http://" + rebound},
                        {"Sec-Fetch-Site", "same-origin"},
                        {"Content-Type", "application/json"}};
  for (const std::string path :
       {"/v1/policy", "/v1/rollback", "/v1/top", "/metrics", "/readyz", "/healthz", "/nope"}) {
    const HttpResponse r = Admin("GET", path, page);
    EXPECT_EQ(r.status, 421) << path << ": " << r.body;
    EXPECT_EQ(r.body.find("\"rules\""), std::string::npos) << path << ": " << r.body;
  }
  for (const Action& a : StateChangingActions()) {
    EXPECT_EQ(Admin(a.method, a.target, page, a.body).status, 421) << a.method << " " << a.target;
  }
  for (const std::string host : {"EVIL.example", "127.0.0.1.evil.example", "localhost.evil.example",
                                 "[::1", "127.0.0.1:x"}) {
    EXPECT_EQ(Admin("GET", "/v1/policy", {{"Host", host}}).status, 421) << host;
  }
  ExpectUnchanged(generation);
}

// What curl, the CLI or an operator's page served by the listener itself
// sends still works.
TEST_F(AdminGuard, CurlTheCliAndSameOriginRequestsWork) {
  Start();
  DrainVictim();
  const std::string port = std::to_string(s_->admin_port);
  const std::string reset = R"({"rule": "keyed", "values": ["victim"]})";
  HttpResponse r = Admin("POST", "/v1/keys/reset", Curl(), reset);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Remaining("victim"), 3);
  for (const std::string& host :
       std::vector<std::string>{"localhost:" + port, "[::1]:" + port, "127.0.0.1", "LOCALHOST"}) {
    EXPECT_EQ(Admin("POST", "/v1/keys/reset",
                    {{"Host", host}, {"Content-Type", "application/json; charset=utf-8"}}, reset)
                  .status,
              200)
        << host;
  }
  // An operator's own page on the admin listener: same-origin.
  const std::string self = "127.0.0.1:" + port;
  const Headers own = {{"Host", self},
                       {"Origin", "http://" + self},
                       {"Sec-Fetch-Site", "same-origin"},
                       {"Content-Type", "application/json"}};
  r = Admin("POST", "/v1/rollback/trip?rule=keyed&reason=INC-1", own);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Tripped());
  r = Admin("POST", "/v1/rollback/clear?rule=keyed", Curl());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(Tripped());
  const int64_t generation = Generation();
  r = Admin("POST", "/v1/reload", Curl());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Generation(), generation + 1);
  r = Admin("PUT", "/v1/policy", Curl(), GenerousPolicy(1000000));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ReadAll(s_->policy_path), GenerousPolicy(1000000));
  // A name the operator configured is answered like an address.
  server::ServerConfig c = TestServer::DefaultConfig();
  c.admin_allowed_hosts = {"tollgate-admin.internal"};
  std::string error;
  auto named = TestServer::Start(c, TightPolicy(), &error);
  ASSERT_TRUE(named) << error;
  EXPECT_EQ(Fetch(named->admin_port, "GET", "/v1/policy",
                  {{"Host", "Tollgate-Admin.internal:" + std::to_string(named->admin_port)}})
                .status,
            200);
  EXPECT_EQ(Fetch(named->admin_port, "GET", "/v1/policy", {{"Host", "evil.example"}}).status, 421);
}

// With a token the page cannot know the request is refused anyway (401); one
// that carries the token is still refused when a page sent it (defence in
// depth), and the token alone makes a bodyless POST non-simple.
TEST_F(AdminGuard, WithATokenCrossSiteIsStillRefused) {
  server::ServerConfig c = TestServer::DefaultConfig();
  c.admin_token = "admin-guard-token-0123";
  Start(c);
  const std::string host = "127.0.0.1:" + std::to_string(s_->admin_port);
  const Headers bearer = {{"Host", host}, {"Authorization", "Bearer admin-guard-token-0123"}};
  EXPECT_EQ(Admin("POST", "/v1/rollback/trip?rule=keyed", Page(host)).status, 401);
  Headers page_with_token = Page(host);
  page_with_token.push_back(bearer[1]);
  EXPECT_EQ(Admin("POST", "/v1/rollback/trip?rule=keyed", page_with_token).status, 403);
  Headers keys = bearer;
  keys.push_back({"Content-Type", "text/plain"});
  EXPECT_EQ(Admin("POST", "/v1/keys/reset", keys, StateChangingActions()[2].body).status, 415);
  EXPECT_EQ(Admin("GET", "/v1/rollback", Page("evil.example")).status, 421);
  // The operator's curl with the token: no media type needed on a bodyless POST.
  const HttpResponse r = Admin("POST", "/v1/rollback/trip?rule=keyed", bearer);
  EXPECT_EQ(r.status, 200) << r.body;
}

// Finding 7: the public listener's /readyz says whether the instance is
// ready, not which rules are rolled back, where the policy comes from or
// where the store is; the admin listener keeps the detail.
TEST_F(AdminGuard, PublicReadyzSaysOnlyWhetherReady) {
  Start();
  ASSERT_EQ(Admin("POST", "/v1/rollback/trip?rule=keyed&reason=INC-2", Curl()).status, 200);
  const HttpResponse pub = Fetch(s_->port, "GET", "/readyz");
  ASSERT_EQ(pub.status, 200) << pub.body;
  const json p = Body(pub);
  EXPECT_EQ(p, (json{{"ready", true}, {"draining", false}})) << p;
  for (const std::string& secret :
       std::vector<std::string>{"keyed", "INC-2", "local", "file:", s_->policy_path}) {
    EXPECT_EQ(pub.body.find(secret), std::string::npos) << secret << " in " << pub.body;
  }
  const json a = Body(Admin("GET", "/readyz", Curl()));
  EXPECT_EQ(a["ready"], true);
  ASSERT_EQ(a["rolled_back"].size(), 1u) << a;
  EXPECT_EQ(a["rolled_back"][0]["rule"], "keyed");
  EXPECT_EQ(a["policy_source"], "file:" + s_->policy_path);
  EXPECT_TRUE(a.contains("store")) << a;
}

#if TOLLGATE_TEST_HOSTILE_REDIS
// Finding 7: key administration on a Redis that does not answer waits off the
// worker. One worker serves both listeners; while /v1/keys/get waits for the
// held reply, a decision on that worker (one no rule charges: no store call)
// is answered. Without the admin executor the worker waits in the store call
// (for the store's timeout, a minute here) and the decision is not answered.
TEST_F(AdminGuard, KeyAdminWaitsOnAStalledStoreOffTheWorker) {
  HostileRedis::Options ho;
  ho.reply = HostileRedis::Reply::kHold;
  ho.answer_script_load = true;
  std::string error;
  auto redis = HostileRedis::Start(ho, &error);
  ASSERT_TRUE(redis) << error;
  server::ServerConfig c = TestServer::DefaultConfig();
  c.threads = 1;
  c.store = redis->url();
  c.share_rollback = false;
  c.store_timeout = Scaled(server::Millis(60000));
  auto s = TestServer::Start(c, GenerousPolicy(1000000), &error);
  ASSERT_TRUE(s) << error;

  std::atomic<bool> answered{false};
  HttpResponse admin;
  std::thread key_get([&] {
    HttpConnection conn(s->admin_port, 120s);
    admin = conn.Request("POST", "/v1/keys/get", {{"Content-Type", "application/json"}},
                         R"({"rule": "keyed", "values": ["k"]})");
    answered = true;
  });
  // The key's read has reached the store, which holds it.
  const bool waiting = WaitFor([&] { return redis->Received("EVALSHA"); }, 30s);
  EXPECT_TRUE(waiting) << "commands: " << redis->commands().size();
  HttpResponse decision;
  if (waiting) {
    HttpConnection conn(s->port, 10s);
    decision = conn.Request("GET", "/v1/auth", {{"X-Original-URI", "/"}});  // no x-api-key: skipped
    EXPECT_FALSE(answered.load()) << "the key read was answered before the store replied";
  }
  redis->SetReply(HostileRedis::Reply::kWrongType);  // the store answers (badly) now
  key_get.join();
  EXPECT_EQ(decision.status, 204) << "the decision waited for the admin call: "
                                  << (decision.ok ? decision.body : decision.error);
  // The key read is answered once the store replies (its bad reply: the failure mode's answer).
  EXPECT_TRUE(admin.ok) << admin.error;
  EXPECT_TRUE(admin.status == 200 || admin.status == 503) << admin.status << " " << admin.body;
}
#endif

}  // namespace
}  // namespace tollgate::testing
