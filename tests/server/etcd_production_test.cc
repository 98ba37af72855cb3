// The etcd policy source against a production-like etcd (issue 35): one etcd
// member with TLS on its client URL (certificates made by openssl in the
// test), --client-cert-auth, and authentication on (etcdctl user/role/auth
// enable) with simple tokens that expire after one idle second
// (--auth-token-ttl=1). tollgated in process loads the policy over TLS with a
// client certificate and a user's password, follows the key, writes it back
// with PUT /v1/policy, keeps going after etcd restarts (every token forgotten),
// fails over from a dead first endpoint to a named (resolved) second one, and
// refuses to start with a wrong password, no client certificate or the wrong
// CA, saying which setting is at fault.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "server_fixture.h"
#include "test_http.h"
#include "testing/etcd_server.h"
#include "testing/redis_server.h"  // FreeLoopbackPort
#include "testing/scoped_temp_dir.h"

namespace tollgate {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::Fetch;
using testing::TestServer;
using testing::WaitFor;

constexpr const char* kKey = "/tollgate/policy";
constexpr const char* kUser = "tollgate";
constexpr const char* kPassword = "s3cret-etcd-pw";

std::string Keyed(int burst) {
  return R"({"rules": [{"name": "keyed", "limit_keys": ["header:x-api-key"],
     "algorithm_config": {"rps": 0.01, "burst": )" +
         std::to_string(burst) + "}}]}";
}

json Policy(const TestServer& s) {
  auto r = Fetch(s.admin_port, "GET", "/v1/policy");
  json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

class EtcdProductionTest : public ::testing::Test {
 protected:
  // One etcd for the suite: TLS, client certificates, auth on.
  static void SetUpTestSuite() {
    auto started =
        testing::EtcdServer::Start({.tls = true,
                                    .client_cert_auth = true,
                                    .extra_args = {"--auth-token=simple", "--auth-token-ttl=1"}});
    if (started.missing) {
      missing_ = new std::string(started.error);
      return;
    }
    ASSERT_TRUE(started) << started.error;
    etcd_ = started.server.release();
    ASSERT_EQ(etcd_->EnableAuth("root-pw-for-tests", kUser, kPassword, kKey), "");
    ASSERT_GT(etcd_->Put(kKey, Keyed(3)), 0);
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
    delete missing_;
    missing_ = nullptr;
  }

  void SetUp() override {
    if (missing_) GTEST_SKIP() << *missing_;
    ASSERT_NE(etcd_, nullptr);
    WriteFile(files_.File("password"), std::string(kPassword) + "\n");
    WriteFile(files_.File("wrong-password"), "not-the-password\n");
  }

  // tollgated's config for the member at `endpoints` ("127.0.0.1:port").
  server::ServerConfig Config(const std::string& endpoints) const {
    server::ServerConfig c = TestServer::DefaultConfig();
    c.policy_path = "etcds://" + endpoints + kKey;
    c.etcd.username = kUser;
    c.etcd.password_file = files_.File("password");
    c.etcd.tls.ca_file = etcd_->pki() + "/ca.pem";
    c.etcd.tls.cert_file = etcd_->pki() + "/gateway-client.pem";
    c.etcd.tls.key_file = etcd_->pki() + "/gateway-client.key";
    return c;
  }

  std::string Value() const {
    bool ok = false;
    const std::string out = etcd_->Etcdctl(std::string("get --print-value-only ") + kKey, &ok);
    return ok ? out : "etcdctl failed: " + out;
  }

  static testing::EtcdServer* etcd_;
  static std::string* missing_;
  testing::ScopedTempDir files_{"EtcdProductionTest"};
};

testing::EtcdServer* EtcdProductionTest::etcd_ = nullptr;
std::string* EtcdProductionTest::missing_ = nullptr;

// The policy loads over TLS with a client certificate and a login; a change
// written with etcdctl arrives through the watch; PUT /v1/policy writes the
// key over the same connection settings; an etcd restart (which forgets every
// simple token) is survived by the watch and by the next write, both logging
// in again.
TEST_F(EtcdProductionTest, LoadsWatchesAndWritesOverTlsWithAuth) {
  ASSERT_GT(etcd_->Put(kKey, Keyed(3)), 0);
  const server::ServerConfig c = Config(etcd_->endpoint());
  std::string error;
  auto s = TestServer::Start(c, "", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(Policy(*s)["source"], c.policy_path);
  EXPECT_EQ(Policy(*s)["version"], ParsePolicy(Keyed(3)).version);

  ASSERT_GT(etcd_->Put(kKey, Keyed(4)), 0);
  EXPECT_TRUE(WaitFor([&] { return Policy(*s)["version"] == ParsePolicy(Keyed(4)).version; }, 20s))
      << Policy(*s).dump();

  // Idle past the token's TTL is not needed for this write to need a login:
  // the write-back goes through the same session, whatever its token's state.
  auto put =
      Fetch(s->admin_port, "PUT", "/v1/policy", {{"Content-Type", "application/json"}}, Keyed(5));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_NE(Value().find("\"burst\": 5"), std::string::npos) << Value();

  // etcd restarted: its simple tokens are gone. The watch re-reads, logs in
  // again and follows; a write logs in again too.
  ASSERT_EQ(etcd_->Restart(), "");
  ASSERT_GT(etcd_->Put(kKey, Keyed(6)), 0);
  EXPECT_TRUE(WaitFor([&] { return Policy(*s)["version"] == ParsePolicy(Keyed(6)).version; }, 30s))
      << Policy(*s).dump();
  put = Fetch(s->admin_port, "PUT", "/v1/policy", {{"Content-Type", "application/json"}}, Keyed(7));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_NE(Value().find("\"burst\": 7"), std::string::npos) << Value();
}

// A dead first endpoint (nothing listens) and the member under a DNS name
// (localhost, resolved at each connection and verified against the
// certificate's DNS name): start, watch and write go to the second.
TEST_F(EtcdProductionTest, ASecondEndpointTakesOverWhenTheFirstIsDown) {
  ASSERT_GT(etcd_->Put(kKey, Keyed(3)), 0);
  const int dead = testing::FreeLoopbackPort();
  ASSERT_GT(dead, 0);
  const server::ServerConfig c = Config("127.0.0.1:" + std::to_string(dead) +
                                        ",localhost:" + std::to_string(etcd_->client_port()));
  std::string error;
  auto s = TestServer::Start(c, "", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(Policy(*s)["version"], ParsePolicy(Keyed(3)).version);
  ASSERT_GT(etcd_->Put(kKey, Keyed(8)), 0);
  EXPECT_TRUE(WaitFor([&] { return Policy(*s)["version"] == ParsePolicy(Keyed(8)).version; }, 20s))
      << Policy(*s).dump();
  auto put =
      Fetch(s->admin_port, "PUT", "/v1/policy", {{"Content-Type", "application/json"}}, Keyed(9));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_NE(Value().find("\"burst\": 9"), std::string::npos) << Value();
}

// What a misconfigured tollgated says at start: the setting at fault, never
// the password.
TEST_F(EtcdProductionTest, WrongCredentialsOrTlsFilesFailNamingTheSetting) {
  struct Case {
    const char* name;
    std::function<void(server::ServerConfig&)> change;
    std::vector<std::string> said;
  };
  const std::vector<Case> cases = {
      {"wrong password",
       [&](server::ServerConfig& c) { c.etcd.password_file = files_.File("wrong-password"); },
       {"etcd.password_file", "authentication failed"}},
      {"no client certificate",
       [](server::ServerConfig& c) { c.etcd.tls.cert_file = c.etcd.tls.key_file = ""; },
       {"etcd.tls.cert_file"}},
      {"client certificate with a CommonName",
       [&](server::ServerConfig& c) {
         c.etcd.tls.cert_file = etcd_->pki() + "/client.pem";
         c.etcd.tls.key_file = etcd_->pki() + "/client.key";
       },
       {"etcd.tls.cert_file", "CommonName"}},
      {"wrong CA",
       [&](server::ServerConfig& c) { c.etcd.tls.ca_file = etcd_->pki() + "/other-ca.pem"; },
       {"etcd.tls.ca_file", "certificate verify failed"}},
      {"no auth configured",
       [](server::ServerConfig& c) { c.etcd.username = c.etcd.password_file = ""; },
       {"etcd.username"}},
      {"plain etcd:// with TLS settings",
       [&](server::ServerConfig& c) { c.policy_path = "etcd://" + etcd_->endpoint() + kKey; },
       {"etcd.tls", "etcds://"}},
      {"password file missing",
       [&](server::ServerConfig& c) { c.etcd.password_file = files_.File("absent"); },
       {"etcd.password_file", "cannot open"}},
  };
  for (const Case& t : cases) {
    server::ServerConfig c = Config(etcd_->endpoint());
    t.change(c);
    std::string error;
    EXPECT_FALSE(TestServer::Start(c, "", &error)) << t.name;
    for (const std::string& said : t.said) {
      EXPECT_NE(error.find(said), std::string::npos) << t.name << ": " << error;
    }
    EXPECT_EQ(error.find(kPassword), std::string::npos) << t.name << ": " << error;
  }
}

}  // namespace
}  // namespace tollgate
