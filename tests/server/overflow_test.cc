// The local store's key table full through tollgated's public /v1/decide:
// half again as many identities as the table holds, then new users are served
// as the overflow policy says, and a flooded rule leaves another rule's buckets
// alone. The table is small (8,192 keys): the behaviour at the cap is the same
// at any size, and a flood of 100k keys through /v1/decide took 99 s of CI's
// sanitizer stage.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/config.h"
#include "server/server_fixture.h"
#include "server/test_http.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;

// One token per 1000 s: every key charged once stays in debt for the test.
constexpr const char* kPolicy = R"({"rules": [
  {"name": "flooded", "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
   "algorithm_config": {"rps": 0.001, "burst": 1}},
  {"name": "other", "limit_keys": ["header:x-user"], "algorithm": "token_bucket",
   "algorithm_config": {"rps": 0.001, "burst": 1}}
]})";

constexpr int kMaxKeys = 8192;
constexpr int kFloodKeys = kMaxKeys * 3 / 2;
constexpr int kBatch = 64;  // /v1/decide's item limit

// The verdict of one /v1/decide call for `items` (rule, key) pairs, or -1 on error.
int Decide(HttpConnection& c, const std::vector<std::pair<std::string, std::string>>& items) {
  json body = {{"items", json::array()}};
  for (const auto& [rule, key] : items) body["items"].push_back({{"rule", rule}, {"key", key}});
  HttpResponse r =
      c.Request("POST", "/v1/decide", {{"Content-Type", "application/json"}}, body.dump());
  if (r.status != 200) return -1;
  return json::parse(r.body, nullptr, false).value("allowed", false) ? 1 : 0;
}

double Metric(int admin_port, const std::string& series) {
  const HttpResponse r = Fetch(admin_port, "GET", "/metrics");
  const size_t at = r.body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(r.body.substr(at + series.size() + 2));
}

class OverflowE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(OverflowE2E, NewUsersAfterTheTableFillsAreServedByThePolicy) {
  const std::string policy = GetParam();
  server::ServerConfig config = TestServer::DefaultConfig();
  config.store = "local://?max_keys=" + std::to_string(kMaxKeys) + "&overflow=" + policy;
  std::string error;
  auto s = TestServer::Start(config, kPolicy, &error);
  ASSERT_TRUE(s) << error;
  HttpConnection c(s->port, std::chrono::seconds(30));
  ASSERT_TRUE(c.connected());

  // A client of the other rule, throttled before the flood.
  ASSERT_EQ(Decide(c, {{"other", "victim"}}), 1);
  ASSERT_EQ(Decide(c, {{"other", "victim"}}), 0);

  for (int i = 0; i < kFloodKeys; i += kBatch) {
    std::vector<std::pair<std::string, std::string>> items;
    for (int j = i; j < i + kBatch && j < kFloodKeys; ++j) {
      items.emplace_back("flooded", "flood-" + std::to_string(j));
    }
    ASSERT_GE(Decide(c, items), 0) << "batch at " << i;
  }

  int allowed = 0, limited_after = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string user = "new-" + std::to_string(i);
    allowed += Decide(c, {{"flooded", user}}) == 1;
    limited_after += Decide(c, {{"flooded", user}}) == 0;
  }
  // The flood never frees the other rule's throttled client.
  EXPECT_EQ(Decide(c, {{"other", "victim"}}), 0);

  if (policy == "evict") {
    EXPECT_EQ(allowed, 200);
    EXPECT_GT(limited_after, 150) << "most new users hold a real bucket";
    EXPECT_GT(Metric(s->admin_port, R"(tollgate_store_keys_evicted_in_debt_total{store="local"})"),
              0);
  } else if (policy == "allow") {
    EXPECT_EQ(allowed, 200);
    EXPECT_GT(
        Metric(s->admin_port, R"(tollgate_store_overflow_total{store="local",result="allowed"})"),
        0);
  } else {
    EXPECT_LT(allowed, 200);
    EXPECT_GT(
        Metric(s->admin_port, R"(tollgate_store_overflow_total{store="local",result="rejected"})"),
        0);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, OverflowE2E, ::testing::Values("evict", "allow", "reject"));

// The local store's options from the URL or the config file, checked by
// validation (so --check refuses what startup would).
TEST(LocalStoreConfig, UrlAndFieldsAreValidated) {
  server::ServerConfig c;
  c.policy_path = "p.json";
  auto errors_for = [&c](const std::string& store) {
    c.store = store;
    return server::ValidateServerConfig(c);
  };
  for (const char* ok : {"local", "local://", "local://?overflow=allow", "local://?overflow=reject",
                         "local://?overflow=evict&max_keys=1000&max_keys_per_rule=100"}) {
    EXPECT_TRUE(errors_for(ok).empty()) << ok;
  }
  for (const char* bad : {"local://?overflow=drop", "local://?max_keys=0", "local://?bogus=1",
                          "local://x", "localx"}) {
    EXPECT_FALSE(errors_for(bad).empty()) << bad;
  }
  // An unknown overflow policy is refused where the config is parsed.
  server::ServerConfig unknown;
  EXPECT_FALSE(
      server::ParseServerConfig(R"({"store": {"local_overflow": "sometimes"}})", &unknown).empty());

  // The URL wins over the fields.
  c.local_overflow = OverflowPolicy::kReject;
  c.local_max_keys = 500;
  c.store = "local://?overflow=allow";
  auto o = LocalStoreOptionsOf(c);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->overflow, OverflowPolicy::kAllow);
  EXPECT_EQ(o->max_keys, 500u);

  const std::string file = R"({"policy": "p.json", "store": {"url": "local",
    "local_overflow": "allow", "local_max_keys_per_rule": 7}})";
  server::ServerConfig parsed;
  ASSERT_TRUE(server::ParseServerConfig(file, &parsed).empty());
  EXPECT_EQ(parsed.local_overflow, OverflowPolicy::kAllow);
  EXPECT_EQ(parsed.local_max_keys_per_rule, 7u);
}

}  // namespace
}  // namespace tollgate::testing
