// The etcd policy source end to end (issue 21): three tollgated instances in
// process watch one key of a real etcd (tests/testing/etcd_server.h). A PUT to
// etcd answers with the new policy on all three; a bad revision is rejected on
// all three and the last good one keeps deciding; etcd killed and restarted
// while they decide; PUT /v1/policy on one instance writes etcd and reaches all.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
  auto put = Fetch(fleet[1]->admin_port, "PUT", "/v1/policy", {}, Keyed(7));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_TRUE(WaitFor([&] { return all_at(ParsePolicy(Keyed(7)).version); }, 10s));
}

}  // namespace
}  // namespace tollgate
