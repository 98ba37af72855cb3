// The etcd policy source end to end (issue 21): three tollgated instances in
// process watch one key of a real etcd (tests/testing/etcd_server.h). A PUT to
// etcd answers with the new policy on all three; a bad revision is rejected on
// all three and the last good one keeps deciding; etcd killed and restarted
// while they decide; PUT /v1/policy on one instance writes etcd and reaches all.
// A reload while etcd is frozen waits off the decision worker.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "runtime/etcd_watch.h"
#include "server_fixture.h"
#include "test_http.h"
#include "testing/etcd_server.h"

namespace tollgate {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::Fetch;
using testing::TestServer;
using testing::WaitFor;

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

// How many requests with `key` the instance allows before a 429.
int Allowed(const TestServer& s, const std::string& key) {
  int allowed = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = Fetch(s.port, "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Api-Key", key}});
    if (r.status != 204) break;
    ++allowed;
  }
  return allowed;
}

TEST(EtcdPolicySource, ThreeInstancesFollowOneKey) {
  auto etcd = testing::EtcdServer::Start();
  if (etcd.missing) GTEST_SKIP() << etcd.error;
  ASSERT_TRUE(etcd) << etcd.error;
  ASSERT_GT(etcd->Put("/tollgate/policy", Keyed(3)), 0);
  server::ServerConfig c = TestServer::DefaultConfig();
  c.policy_path = "etcd://" + etcd->endpoint() + "/tollgate/policy";
  std::vector<std::unique_ptr<TestServer>> fleet;
  for (int i = 0; i < 3; ++i) {
    std::string error;
    fleet.push_back(TestServer::Start(c, "", &error));
    ASSERT_TRUE(fleet.back()) << error;
    EXPECT_EQ(Policy(*fleet.back())["source"], c.policy_path);
  }
  // Decisions on instance 0 throughout, racing the watch thread's reloads and
  // the admin PUT (what TSan checks here); each must be answered.
  std::atomic<bool> stop{false};
  std::atomic<int> unanswered{0};
  std::thread decider([&] {
    while (!stop) {
      auto r = Fetch(fleet[0]->port, "GET", "/v1/auth",
                     {{"X-Original-URI", "/"}, {"X-Api-Key", "racing"}});
      if (r.status != 204 && r.status != 403) ++unanswered;
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      t.join();
    }
  } join{stop, decider};
  const std::string v5 = ParsePolicy(Keyed(5)).version;
  auto all_at = [&](const std::string& version) {
    for (auto& s : fleet) {
      if (Policy(*s)["version"] != version) return false;
    }
    return true;
  };

  // A change reaches all three; measured from the PUT to all three answering with it.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_GT(etcd->Put("/tollgate/policy", Keyed(5)), 0);
  ASSERT_TRUE(WaitFor([&] { return all_at(v5); }, 10s));
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  std::printf("etcd PUT -> new policy on all three instances: %.1f ms\n",
              std::chrono::duration<double, std::milli>(elapsed).count());
  for (size_t i = 0; i < fleet.size(); ++i) {
    EXPECT_EQ(Allowed(*fleet[i], "k" + std::to_string(i)), 5);
  }

  // A bad revision: rejected on all three, the last good one stays.
  ASSERT_GT(etcd->Put("/tollgate/policy", R"({"rules": [{"name": "x"}]})"), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& s : fleet) {
          if (Policy(*s)["last_reload"]["ok"] != false) return false;
        }
        return true;
      },
      10s));
  EXPECT_TRUE(all_at(v5));

  // etcd gone: decisions continue on the last good policy; back: a new change applies.
  etcd->Kill();
  EXPECT_EQ(Allowed(*fleet[0], "while-down"), 5);
  ASSERT_EQ(etcd->Restart(), "");
  ASSERT_GT(etcd->Put("/tollgate/policy", Keyed(6)), 0);
  EXPECT_TRUE(WaitFor([&] { return all_at(ParsePolicy(Keyed(6)).version); }, 20s));

  // PUT /v1/policy on one instance writes etcd; the others follow.
  auto put = Fetch(fleet[1]->admin_port, "PUT", "/v1/policy",
                   {{"Content-Type", "application/json"}}, Keyed(7));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_TRUE(WaitFor([&] { return all_at(ParsePolicy(Keyed(7)).version); }, 10s));
  EXPECT_EQ(unanswered.load(), 0);
}

// Issue 29, finding 5: a PUT whose reload would fail (a Redis tenant table on
// the local store) is a 409 and leaves the key as it was, value and
// mod_revision: no instance ever sees it, and a restart opens the running one.
TEST(EtcdPolicySource, APutWhoseReloadFailsLeavesTheKeyUnchanged) {
  auto etcd = testing::EtcdServer::Start();
  if (etcd.missing) GTEST_SKIP() << etcd.error;
  ASSERT_TRUE(etcd) << etcd.error;
  const int64_t written = etcd->Put("/tollgate/policy", Keyed(3));
  ASSERT_GT(written, 0);
  server::ServerConfig c = TestServer::DefaultConfig();
  c.policy_path = "etcd://" + etcd->endpoint() + "/tollgate/policy";
  std::string error;
  auto s = TestServer::Start(c, "", &error);
  ASSERT_TRUE(s) << error;
  auto put = Fetch(s->admin_port, "PUT", "/v1/policy", {{"Content-Type", "application/json"}},
                   R"({"rules": [
    {"name": "keyed", "limit_keys": ["header:x-api-key"], "tenants": {"redis_hash": "plans"},
     "algorithm_config": {"rps": 0.01, "burst": 9}}]})");
  EXPECT_EQ(put.status, 409) << put.body;
  auto url = tollgate::etcd::ParseEtcdUrl(c.policy_path);
  ASSERT_TRUE(url.ok());
  tollgate::etcd::EtcdOptions options;
  options.url = *url;
  auto read = tollgate::etcd::EtcdRange(options);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_TRUE(read->kv);
  EXPECT_EQ(read->kv->value, Keyed(3));
  EXPECT_EQ(read->kv->mod_revision, written);
  EXPECT_EQ(Allowed(*s, "k"), 3);
  // A good PUT still writes the key (a compare on the revision it read).
  auto good =
      Fetch(s->admin_port, "PUT", "/v1/policy", {{"Content-Type", "application/json"}}, Keyed(4));
  ASSERT_EQ(good.status, 200) << good.body;
  read = tollgate::etcd::EtcdRange(options);
  ASSERT_TRUE(read.ok() && read->kv);
  EXPECT_EQ(read->kv->value, Keyed(4));
}

// A URL that carries credentials or names no etcd scheme is refused at start,
// saying what to use instead (no etcd needed).
TEST(EtcdPolicySource, UrlsWithCredentialsOrOtherSchemesAreRefusedSayingWhy) {
  const std::pair<std::string, std::string> cases[] = {
      {"https://127.0.0.1:2379/tollgate/policy", "etcds://"},
      {"etcd://user:pw@127.0.0.1:2379/tollgate/policy", "etcd.password_file"},
      {"etcd://etcd_internal:2379/tollgate/policy", "DNS name"}};
  for (const auto& [url, why] : cases) {
    server::ServerConfig c = TestServer::DefaultConfig();
    c.policy_path = url;
    std::string error;
    EXPECT_FALSE(TestServer::Start(c, "", &error)) << url;
    EXPECT_NE(error.find(why), std::string::npos) << url << ": " << error;
    EXPECT_EQ(error.find(":pw@"), std::string::npos) << error;
  }
}

// Sockets connected to 127.0.0.1:`port` on its side (ESTABLISHED, incl. those
// a stopped process has not accepted yet), from /proc/net/tcp.
int ConnectionsTo(int port) {
  std::FILE* f = std::fopen("/proc/net/tcp", "r");
  if (!f) return -1;
  char line[512];
  int n = 0;
  char want[16];
  std::snprintf(want, sizeof want, "0100007F:%04X", port);
  while (std::fgets(line, sizeof line, f)) {
    unsigned slot = 0, state = 0;
    char local[64], remote[64];
    if (std::sscanf(line, " %u: %63s %63s %x", &slot, local, remote, &state) == 4 && state == 1 &&
        std::string(local) == want) {
      ++n;
    }
  }
  std::fclose(f);
  return n;
}

// POST /v1/reload with a frozen etcd (SIGSTOP) waits on etcd for io_timeout
// per listed member; it must wait on its own thread, not on the worker that
// also answers decisions (one worker here, so a blocked worker blocks all).
TEST(EtcdPolicySource, ReloadFromAFrozenEtcdDoesNotBlockDecisions) {
  auto etcd = testing::EtcdServer::Start();
  if (etcd.missing) GTEST_SKIP() << etcd.error;
  ASSERT_TRUE(etcd) << etcd.error;
  ASSERT_GT(etcd->Put("/tollgate/policy", Keyed(3)), 0);
  server::ServerConfig c = TestServer::DefaultConfig();
  c.threads = 1;
  // Listed eight times: a read with etcd frozen waits 8 x io_timeout (2 s).
  c.policy_path = "etcd://";
  for (int i = 0; i < 8; ++i) c.policy_path += (i ? "," : "") + etcd->endpoint();
  c.policy_path += "/tollgate/policy";
  std::string error;
  auto s = TestServer::Start(c, "", &error);
  ASSERT_TRUE(s) << error;

  etcd->Pause();
  const int before = ConnectionsTo(etcd->client_port());
  std::atomic<bool> reloaded{false};
  int reload_status = 0;
  std::string reload_body;
  std::thread reload([&] {
    testing::HttpConnection admin(s->admin_port, 120s);
    auto r = admin.Request("POST", "/v1/reload", {{"Content-Type", "application/json"}});
    reload_status = r.status;
    reload_body = r.body;
    reloaded = true;
  });
  // The reload has reached etcd (its connection waits in the frozen etcd's queue).
  EXPECT_TRUE(
      WaitFor([&] { return reloaded || ConnectionsTo(etcd->client_port()) > before; }, 10s));
  auto decided = Fetch(s->port, "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Api-Key", "a"}});
  EXPECT_EQ(decided.status, 204);
  EXPECT_FALSE(reloaded) << "the decision waited for the reload";
  etcd->Resume();
  reload.join();
  EXPECT_EQ(reload_status, 200) << reload_body;  // once etcd answers, the reload reads the key
}

}  // namespace
}  // namespace tollgate
