// Named, scoped admin tokens (admin.tokens; issue 35): a read-scoped token
// serves every admin read and changes nothing; a write-scoped one does both;
// audit lines name the token, never its value; a reload reads the token files
// again (a rotation without a restart), and a bad file keeps the old tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "server/config.h"
#include "server/server_fixture.h"
#include "server/test_http.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;

constexpr const char* kReadSecret = "dashboard-secret-0123456789";
constexpr const char* kWriteSecret = "operator-secret-0123456789";

Headers As(const std::string& secret) {
  return {{"Authorization", "Bearer " + secret}, {"Content-Type", "application/json"}};
}

void WriteSecret(const std::string& path, const std::string& secret) {
  WriteFile(path, secret + "\n");
}

class AdminTokensE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    read_file_ = dir_.File("dashboard.token");
    write_file_ = dir_.File("operator.token");
    WriteSecret(read_file_, kReadSecret);
    WriteSecret(write_file_, kWriteSecret);
    server::ServerConfig c = TestServer::DefaultConfig();
    const std::string text = R"({"admin": {"tokens": [
        {"name": "dashboard", "scope": "read", "token_file": ")" +
                             read_file_ + R"("},
        {"name": "operator", "scope": "write", "token_file": ")" +
                             write_file_ + R"("}]}})";
    const std::vector<ConfigError> errors = server::ParseServerConfig(text, &c);
    ASSERT_TRUE(errors.empty()) << errors[0].path << ": " << errors[0].message;
    log_path_ = dir_.File("log.jsonl");
    auto log = server::Logger::Create(server::LogLevel::kInfo, log_path_);
    ASSERT_TRUE(log.ok());
    log_ = std::move(log).value();
    std::string error;
    s_ = TestServer::Start(c, TightPolicy(), &error, log_);
    ASSERT_TRUE(s_) << error;
  }

  HttpResponse Admin(const std::string& method, const std::string& target,
                     const std::string& secret, const std::string& body = "") {
    return Fetch(s_->admin_port, method, target, As(secret), body);
  }
  std::string Log() {
    log_->Flush();
    std::ifstream in(log_path_);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string PolicyVersion() {
    HttpResponse r = Admin("GET", "/v1/policy", kWriteSecret);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false).value("version", "");
  }

  ScopedTempDir dir_;
  std::string read_file_, write_file_, log_path_;
  std::shared_ptr<server::Logger> log_;
  std::unique_ptr<TestServer> s_;
};

const json kKey = {{"rule", "keyed"}, {"values", {"customer-1"}}};

TEST_F(AdminTokensE2E, AReadTokenServesEveryReadAndChangesNothing) {
  for (const std::string target : {"/metrics", "/v1/policy", "/v1/top", "/v1/rollback"}) {
    EXPECT_EQ(Admin("GET", target, kReadSecret).status, 200) << target;
  }
  HttpResponse got = Admin("POST", "/v1/keys/get", kReadSecret, kKey.dump());
  EXPECT_EQ(got.status, 200) << got.body;

  const std::string version = PolicyVersion();
  const std::string raised = R"({"rules": [{"name": "keyed", "limit_keys": ["header:x-api-key"],
      "algorithm": "token_bucket", "algorithm_config": {"rps": 0.01, "burst": 50}}]})";
  struct Change {
    std::string method, target, body;
  };
  const Change changes[] = {
      {"POST", "/v1/reload", ""},
      {"PUT", "/v1/policy", raised},
      {"POST", "/v1/keys/reset", kKey.dump()},
      {"POST", "/v1/keys/set",
       json{{"rule", "keyed"}, {"values", {"customer-1"}}, {"remaining", 0}}.dump()},
      {"POST", "/v1/rollback/trip?rule=keyed&reason=test", ""},
      {"POST", "/v1/rollback/clear?rule=keyed", ""},
  };
  for (const Change& c : changes) {
    HttpResponse r = Admin(c.method, c.target, kReadSecret, c.body);
    EXPECT_EQ(r.status, 403) << c.method << " " << c.target << ": " << r.body;
    EXPECT_NE(r.body.find("scope read"), std::string::npos) << r.body;
  }
  EXPECT_EQ(PolicyVersion(), version) << "a refused PUT changed the policy";
  EXPECT_EQ(Admin("GET", "/v1/rollback", kReadSecret).body.find("\"tripped\":true"),
            std::string::npos);

  // Raw identities and per-item limits are the write scope's too.
  EXPECT_EQ(Admin("GET", "/v1/top?raw=1", kReadSecret).status, 403);
  EXPECT_EQ(Admin("GET", "/v1/top?raw=1", kWriteSecret).status, 200);
  const std::string limited =
      R"({"items": [{"rule": "keyed", "key": "k", "limit": {"rps": 1, "burst": 1}}]})";
  EXPECT_EQ(Fetch(s_->port, "POST", "/v1/decide", As(kReadSecret), limited).status, 403);
  EXPECT_EQ(Fetch(s_->port, "POST", "/v1/decide", As(kWriteSecret), limited).status, 200);

  // The write token changes state; a token nobody configured is no token.
  EXPECT_EQ(Admin("POST", "/v1/reload", kWriteSecret).status, 200);
  EXPECT_EQ(Admin("PUT", "/v1/policy", kWriteSecret, raised).status, 200);
  EXPECT_NE(PolicyVersion(), version);
  EXPECT_EQ(Admin("GET", "/metrics", "someone-else-0123456789").status, 401);
  EXPECT_EQ(Fetch(s_->admin_port, "GET", "/metrics").status, 401);
}

TEST_F(AdminTokensE2E, AuditLinesNameTheTokenNeverItsValue) {
  ASSERT_EQ(Admin("POST", "/v1/keys/reset", kWriteSecret, kKey.dump()).status, 200);
  ASSERT_EQ(Admin("POST", "/v1/rollback/trip?rule=keyed&reason=INC-7", kWriteSecret).status, 200);
  const std::string policy = R"({"rules": [{"name": "keyed", "limit_keys": ["header:x-api-key"],
      "algorithm": "token_bucket", "algorithm_config": {"rps": 0.01, "burst": 9}}]})";
  ASSERT_EQ(Admin("PUT", "/v1/policy", kWriteSecret, policy).status, 200);
  ASSERT_EQ(Admin("POST", "/v1/keys/get", kReadSecret, kKey.dump()).status, 200);

  const std::string log = Log();
  int key_lines = 0, rollback_lines = 0, put_lines = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    const std::string msg = j.value("msg", "");
    if (msg == "key_admin") {
      ++key_lines;
      EXPECT_EQ(j["token"], j.value("action", "") == "get" ? "dashboard" : "operator") << line;
    } else if (msg == "rollback_tripped") {
      ++rollback_lines;
      EXPECT_EQ(j["token"], "operator") << line;
    } else if (j.value("trigger", "") == "admin_put") {
      ++put_lines;
      EXPECT_EQ(j["actor"], "operator@127.0.0.1") << line;
    }
  }
  EXPECT_EQ(key_lines, 2) << log;
  EXPECT_EQ(rollback_lines, 1) << log;
  EXPECT_GE(put_lines, 1) << log;
  EXPECT_EQ(log.find(kWriteSecret), std::string::npos);
  EXPECT_EQ(log.find(kReadSecret), std::string::npos);
}

TEST_F(AdminTokensE2E, AReloadRotatesTheTokensAndABadFileKeepsTheOldOnes) {
  const std::string rotated = "dashboard-rotated-0123456789";
  WriteSecret(read_file_, rotated);
  ASSERT_EQ(Admin("POST", "/v1/reload", kWriteSecret).status, 200);
  EXPECT_EQ(Admin("GET", "/metrics", kReadSecret).status, 401) << "the old secret still works";
  EXPECT_EQ(Admin("GET", "/metrics", rotated).status, 200);

  WriteSecret(read_file_, "short");  // refused by the secret rules: the tokens stay as they were
  ASSERT_EQ(Admin("POST", "/v1/reload", kWriteSecret).status, 200);
  EXPECT_EQ(Admin("GET", "/metrics", rotated).status, 200);
  const std::string log = Log();
  const size_t at = log.find("\"msg\":\"admin_tokens_not_reloaded\"");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  EXPECT_NE(line.find(read_file_), std::string::npos) << line;
  EXPECT_EQ(log.find(rotated), std::string::npos) << "a secret reached the log";
}

// What the config refuses, at the path of the field.
TEST(AdminTokensConfig, ErrorsSayWhichTokenAndWhy) {
  ScopedTempDir dir;
  const std::string a = dir.File("a"), b = dir.File("b"), weak = dir.File("weak");
  WriteSecret(a, "first-secret-0123456789");
  WriteSecret(b, "second-secret-0123456789");
  WriteSecret(weak, "short");
  auto errors_of = [](const std::string& tokens) {
    server::ServerConfig c;
    c.policy_path = "p.json";
    std::vector<ConfigError> errors =
        server::ParseServerConfig(R"({"admin": {"tokens": )" + tokens + "}}", &c);
    if (errors.empty()) errors = server::ValidateServerConfig(c);
    return errors;
  };
  auto token = [](const std::string& name, const std::string& scope, const std::string& file) {
    return R"({"name": ")" + name + R"(", "scope": ")" + scope + R"(", "token_file": ")" + file +
           R"("})";
  };
  EXPECT_TRUE(errors_of("[" + token("x", "read", a) + "," + token("y", "write", b) + "]").empty());
  struct Case {
    std::string tokens, path, says;
  };
  const Case cases[] = {
      {"{}", "admin.tokens", "must be an array"},
      {"[" + token("x", "admin", a) + "]", "admin.tokens[0].scope", "read or write"},
      {"[" + token("x y", "read", a) + "]", "admin.tokens[0].name", "letters"},
      {"[" + token("x", "read", weak) + "]", "admin.tokens[0].token_file", "at least 16"},
      {"[" + token("x", "read", dir.File("missing")) + "]", "admin.tokens[0].token_file",
       "cannot open"},
      {R"([{"name": "x", "scope": "read", "token_file": ")" + a + R"(", "token": "inline"}])",
       "admin.tokens[0].token", ""},
      {"[" + token("x", "read", a) + "," + token("x", "write", b) + "]", "admin.tokens",
       "two tokens are named \"x\""},
      {"[" + token("x", "read", a) + "," + token("y", "write", a) + "]", "admin.tokens",
       "same secret"},
  };
  for (const Case& c : cases) {
    const std::vector<ConfigError> errors = errors_of(c.tokens);
    ASSERT_FALSE(errors.empty()) << c.tokens;
    EXPECT_EQ(errors[0].path, c.path) << c.tokens << ": " << errors[0].message;
    EXPECT_NE(errors[0].message.find(c.says), std::string::npos) << errors[0].message;
    for (const ConfigError& e : errors) {
      EXPECT_EQ(e.message.find("secret-0123456789"), std::string::npos) << e.message;
    }
  }
}

}  // namespace
}  // namespace tollgate::testing
