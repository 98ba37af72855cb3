// Issue 34's done-when, over real sockets: examples/policies/login-protection.json
// (failed logins per user name read from the JSON body, body:/username, and
// per client /64) run by the real tollgated's gateway in front of a real Node
// login service (tests/server/login_upstream.js), on the local store and on a
// real redis-server with two tollgated processes sharing it:
//  - 5 wrong passwords for one user name are answered 401 by the upstream; the
//    6th request and every later one for that user name are refused by
//    tollgated (Retry-After to the block's end, 15 minutes) without reaching
//    the upstream (its own count says so); right passwords before the 5th
//    failure never count; another user name is untouched; `key reset` (the
//    admin API) lifts the block. On Redis the failures are split across the
//    two instances and the block holds on both.
//  - the body reaches the upstream unchanged, also when it comes in pieces or
//    is followed by another request on the same connection;
//  - a login whose user name tollgated cannot read (not JSON, chunked) shares
//    the example's missing_key bucket instead of escaping the count.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/child_process.h"
#include "testing/test_paths.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#endif

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kNode = "/usr/bin/node";

// The Node login service: started on a free port it prints, stopped with the test.
class NodeLogin {
 public:
  explicit NodeLogin(const std::string& dir) : output_(dir + "/node.log") {
    pid_ = SpawnChild({.argv = {kNode, SourcePathOf("tests/server/login_upstream.js")},
                       .env = {},
                       .cwd = "",
                       .output = output_});
    WaitFor(
        [&] {
          const std::string log = ReadWholeFile(output_);
          const size_t at = log.find("listening ");
          if (at == std::string::npos || log.find('\n', at) == std::string::npos) return false;
          port_ = std::atoi(log.c_str() + at + 10);
          return true;
        },
        20s);
  }
  ~NodeLogin() {
    if (pid_ > 0) StopChild(pid_, SIGTERM);
  }
  int port() const { return port_; }
  std::string log() const { return ReadWholeFile(output_); }
  // How many login requests reached it.
  int Seen() const {
    const HttpResponse r = Fetch(port_, "GET", "/seen");
    const size_t at = r.body.find("\"seen\":");
    return at == std::string::npos ? -1 : std::atoi(r.body.c_str() + at + 7);
  }

 private:
  std::string output_;
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string LoginBody(const std::string& user, const std::string& password) {
  return R"({"username": ")" + user + R"(", "password": ")" + password + R"("})";
}

class LoginBodyE2E : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    if (::access(kNode, X_OK) != 0) GTEST_SKIP() << "no node at " << kNode;
    std::string store;
    if (GetParam() == "redis") {
#if TOLLGATE_TEST_REDIS
      redis_ = RedisServer::Start();
      if (redis_.missing) GTEST_SKIP() << redis_.error;
      ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
      store = "\"" + redis_.server->url() + "\"";
#else
      GTEST_SKIP() << "the Redis store is not part of this build";
#endif
    } else {
      store = R"({"url": "local"})";
    }
    node_ = std::make_unique<NodeLogin>(dir_);
    ASSERT_GT(node_->port(), 0) << "node did not start: " << node_->log();
    WriteFile(dir_ + "/tollgated.json",
              R"({"policy": ")" + SourcePathOf("examples/policies/login-protection.json") + R"(",
        "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 2,
        "store": )" +
                  store + R"(, "gateway": {"upstream": "http://127.0.0.1:)" +
                  std::to_string(node_->port()) + R"("}})");
  }
  std::unique_ptr<Tollgated> Start() {
    const std::string run = dir_ + "/run" + std::to_string(++runs_);
    std::filesystem::create_directories(run);
    auto t = std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", dir_ + "/tollgated.json"}, run);
    EXPECT_TRUE(t->WaitStarted()) << "log: " << t->Log() << " stdout: " << t->Stdout();
    return t;
  }
  // The gateway instances: two on one redis-server, the same one twice locally.
  void StartInstances() {
    first_ = Start();
    ASSERT_TRUE(first_);
    if (GetParam() == "redis") {
      second_ = Start();
      ASSERT_TRUE(second_);
    }
  }
  const Tollgated& A() const { return *first_; }
  const Tollgated& B() const { return second_ ? *second_ : *first_; }

  static HttpResponse Login(const Tollgated& t, const std::string& user,
                            const std::string& password) {
    return Fetch(t.port(), "POST", "/login", {{"Content-Type", "application/json"}},
                 LoginBody(user, password));
  }
  static double Metric(const Tollgated& t, const std::string& series) {
    const std::string page = Fetch(t.admin_port(), "GET", "/metrics").body;
    const size_t at = page.find("\n" + series + " ");
    if (at == std::string::npos) return 0;
    return std::atof(page.c_str() + at + series.size() + 2);
  }
  // Waits until the refunds of `n` uncounted logins landed on `t` (a
  // settlement lands after the response).
  static bool WaitUncounted(const Tollgated& t, double n) {
    return WaitFor(
        [&] {
          return Metric(t, "tollgate_refunds_total{rule=\"login-user\",outcome=\"not_counted\"}") ==
                 n;
        },
        10s);
  }
  std::string User(const std::string& name) const {
    return name + "-" + std::to_string(::getpid());
  }

  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  int runs_ = 0;
  // Stopped in reverse: the tollgated processes first, then Node and Redis.
#if TOLLGATE_TEST_REDIS
  RedisServer::StartResult redis_;
#endif
  std::unique_ptr<NodeLogin> node_;
  std::unique_ptr<Tollgated> first_, second_;
};

TEST_P(LoginBodyE2E, FiveWrongPasswordsBlockTheUserNameReadFromTheBody) {
  StartInstances();
  const std::string alice = User("alice"), bob = User("bob");
  // Right passwords, more than the limit, on both instances: never counted.
  for (int i = 0; i < 6; ++i) {
    const Tollgated& t = i % 2 == 0 ? A() : B();
    HttpResponse r = Login(t, alice, "right-" + alice);
    ASSERT_EQ(r.status, 200) << i << " " << r.body;
    EXPECT_NE(r.body.find("\"username\":\"" + alice + "\""), std::string::npos) << r.body;
    ASSERT_TRUE(WaitUncounted(t, (i / (second_ ? 2 : 1)) + 1)) << i;
  }
  // Five wrong passwords, split across the instances: each answered 401 by Node.
  for (int i = 0; i < 5; ++i) {
    HttpResponse r = Login(i < 3 ? A() : B(), alice, "wrong");
    ASSERT_EQ(r.status, 401) << i << " " << r.body;
  }
  const int reached = node_->Seen();
  EXPECT_EQ(reached, 11);
  // The 6th, with the right password: refused by tollgated, the box closes
  // for 15 minutes.
  HttpResponse sixth = Login(A(), alice, "right-" + alice);
  EXPECT_EQ(sixth.status, 429) << sixth.body;
  EXPECT_EQ(sixth.Header("x-ratelimit-reason"), "token_bucket_exceeded; policy=\"login-user\"");
  const int retry6 = std::atoi(sixth.Header("retry-after").c_str());
  EXPECT_GT(retry6, 880);
  EXPECT_LE(retry6, 900);
  // Every later request for that user name, on either instance: refused as blocked.
  for (int i = 0; i < 4; ++i) {
    const Tollgated& t = i % 2 == 0 ? B() : A();
    HttpResponse r = Login(t, alice, i % 2 == 0 ? "right-" + alice : "wrong");
    EXPECT_EQ(r.status, 429) << i << " " << r.body;
    EXPECT_EQ(r.Header("x-ratelimit-reason"), "blocked; policy=\"login-user\"");
    const int retry = std::atoi(r.Header("retry-after").c_str());
    EXPECT_GT(retry, 880) << i;
    EXPECT_LE(retry, 900) << i;
  }
  EXPECT_EQ(node_->Seen(), reached);  // none of them reached Node
  // Another user name is untouched, on both instances.
  EXPECT_EQ(Login(B(), bob, "wrong").status, 401);
  EXPECT_EQ(Login(A(), bob, "right-" + bob).status, 200);
  EXPECT_EQ(node_->Seen(), reached + 2);
  // The admin API's key reset (what `tollgate key reset` calls) lifts the block.
  const Headers kJson = {{"Content-Type", "application/json"}};
  const std::string key = R"({"rule": "login-user", "values": [")" + alice + R"("]})";
  HttpResponse reset = Fetch(A().admin_port(), "POST", "/v1/keys/reset", kJson, key);
  ASSERT_EQ(reset.status, 200) << reset.body;
  HttpResponse after = Login(B(), alice, "right-" + alice);
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(node_->Seen(), reached + 3);
}

// The body the decision read is the body Node gets: sent in two pieces, and
// followed on the same connection by a second login.
TEST_P(LoginBodyE2E, TheBodyIsForwardedUnchanged) {
  StartInstances();
  const std::string carol = User("carol");
  const std::string body = LoginBody(carol, "right-" + carol);
  HttpConnection c(A().port());
  ASSERT_TRUE(c.connected());
  const std::string head =
      "POST /login HTTP/1.1\r\nHost: localhost\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  // Two writes: the rest of the body (and the next request) usually comes in
  // a later read, which the gateway waits for before deciding.
  ASSERT_TRUE(c.SendRaw(head + body.substr(0, 7)));
  ASSERT_TRUE(c.SendRaw(body.substr(7) + head + body));
  for (int i = 0; i < 2; ++i) {
    HttpResponse r = c.ReadResponse();
    ASSERT_EQ(r.status, 200) << i << " " << r.body;
    EXPECT_NE(r.body.find("\"length\":" + std::to_string(body.size())), std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find("\"username\":\"" + carol + "\""), std::string::npos) << r.body;
  }
  EXPECT_EQ(node_->Seen(), 2);
}

// A login whose user name tollgated cannot read (a Content-Type that is not
// JSON, a chunked body) shares the missing_key bucket: five such failures and
// the sixth is refused, whatever user name Node would have read.
TEST_P(LoginBodyE2E, UnreadableBodiesShareOneBucket) {
  StartInstances();
  for (int i = 0; i < 5; ++i) {
    const std::string body = LoginBody(User("u" + std::to_string(i)), "wrong");
    HttpResponse r;
    if (i % 2 == 0) {
      r = Fetch(A().port(), "POST", "/login", {{"Content-Type", "text/plain"}}, body);
    } else {
      char size[16];
      std::snprintf(size, sizeof size, "%zx", body.size());
      r = Fetch(B().port(), "POST", "/login",
                {{"Content-Type", "application/json"}, {"Transfer-Encoding", "chunked"}},
                std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
    }
    ASSERT_EQ(r.status, 401) << i << " " << r.body;
  }
  HttpResponse sixth = Fetch(A().port(), "POST", "/login", {{"Content-Type", "text/plain"}},
                             LoginBody(User("u9"), "right-" + User("u9")));
  EXPECT_EQ(sixth.status, 429) << sixth.body;
  EXPECT_EQ(node_->Seen(), 5);
  // A readable user name is its own bucket.
  const std::string dave = User("dave");
  EXPECT_EQ(Login(B(), dave, "right-" + dave).status, 200);
}

// `tollgate explain --body` reads body: sources as the gateway does: the key
// is the body's /username; without a JSON Content-Type it is absent (the
// example's shared missing-key bucket).
TEST(LoginBodyExplain, ExplainReadsTheBody) {
  const std::string cli = ProgramPath("TOLLGATE_CLI_PATH");
  if (cli.empty()) GTEST_SKIP() << "no tollgate CLI in this build";
  auto run = [&](const std::string& args) {
    const std::string command = cli + " explain --policy " +
                                SourcePathOf("examples/policies/login-protection.json") +
                                " --method POST --path /login " + args + " 2>&1";
    std::string out;
    FILE* p = ::popen(command.c_str(), "r");
    if (p == nullptr) return out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << out;
    return out;
  };
  const std::string json = run(R"(--body '{"username": "alice-explained", "password": "x"}')");
  EXPECT_NE(json.find("alice-explained"), std::string::npos) << json;
  const std::string plain =
      run(R"(--header 'Content-Type: text/plain' --body '{"username": "alice-explained"}')");
  EXPECT_EQ(plain.find("alice-explained"), std::string::npos) << plain;
  EXPECT_NE(plain.find("login-user"), std::string::npos) << plain;
}

INSTANTIATE_TEST_SUITE_P(Stores, LoginBodyE2E, ::testing::Values("local", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tollgate::testing
