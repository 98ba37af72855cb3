// The Envoy engine inside a tollgate::Runtime (no gRPC, no socket): the Envoy
// rule files are the Runtime's companion, so one reload publishes the HTTP
// policy and the Envoy configuration by one swap with one generation. A
// decision of each reports the generation it decided with; while a reload
// compiles, both still show the old snapshot (never a new policy beside an
// old Envoy configuration); a reload that fails on either side installs
// neither.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "rls/rls_decider.h"
#include "testing/scoped_temp_dir.h"
#include "tollgate/request.h"
#include "tollgate/runtime.h"

namespace tollgate::rls {
namespace {

using testing::ScopedTempDir;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// HTTP: one bucket of `burst` for every client.
std::string PolicyText(int burst) {
  return R"({"rules": [{"name": "all", "limit_keys": ["const:all"],
             "algorithm": "token_bucket",
             "algorithm_config": {"rps": 1, "burst": )" +
         std::to_string(burst) + "}}]}";
}

// Envoy: `per_minute` requests a minute per user.
std::string Yaml(int per_minute) {
  return "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
         "requests_per_unit: " +
         std::to_string(per_minute) + "}\n";
}

rlspb::RateLimitRequest UserRequest() {
  rlspb::RateLimitRequest r;
  r.set_domain("api");
  auto* e = r.add_descriptors()->add_entries();
  e->set_key("user");
  e->set_value("u1");
  return r;
}

// What one decision on each side saw: the generation and the limit it decided by.
struct Seen {
  uint64_t http_generation = 0;
  int64_t http_burst = 0;
  uint64_t envoy_generation = 0;
  uint32_t envoy_limit = 0;
};

struct Fixture {
  ScopedTempDir dir;
  std::string policy_path = dir.File("policy.json");
  std::string yaml_path = dir.File("api.yaml");
  ManualClock clock;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<RlsDecider> decider;
  // Runs inside the companion's compile, before the swap.
  std::function<void()> while_compiling;

  void Open() {
    WriteFile(policy_path, PolicyText(10));
    WriteFile(yaml_path, Yaml(5));
    RuntimeOptions options;
    options.policy.location = policy_path;
    options.store.url = "local";
    options.envoy = true;
    RuntimeEnv env;
    env.clock = &clock;
    env.io_clock = &clock;
    auto made = Runtime::Create(std::move(options), std::move(env));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    runtime = std::move(made).value();
    auto front_end = runtime->enforcer().AddFrontEnd(EnvoyResponseOptions({}));
    ASSERT_TRUE(front_end.ok()) << front_end.status().ToString();
    CompanionConfig companion =
        RlsCompanion(runtime->policies(), runtime->enforcer(), *front_end, {yaml_path}, {});
    companion.compile = [this, compile = companion.compile](std::shared_ptr<const void>* out) {
      if (while_compiling) while_compiling();
      return compile(out);
    };
    ASSERT_TRUE(runtime->AttachCompanion(std::move(companion)).empty());
    decider = std::make_unique<RlsDecider>(&runtime->policies(), &runtime->enforcer(), *front_end,
                                           &clock);
  }

  Seen DecideBoth() {
    Seen s;
    RequestView request{"GET", "/api/items", "", "192.0.2.1", {}};
    CheckOutcome http = runtime->enforcer().Check(request);
    s.http_generation = http.policy_generation;
    if (!http.rules.empty() && http.rules[0].limit) s.http_burst = http.rules[0].limit->burst();
    rlspb::RateLimitResponse response;
    Status st = decider->DecideSync(UserRequest(), &response, &s.envoy_generation);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (response.statuses_size() == 1) {
      s.envoy_limit = response.statuses(0).current_limit().requests_per_unit();
    }
    return s;
  }
};

TEST(RlsRuntimeReload, HttpAndEnvoyDecideWithTheSameGeneration) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.Open());
  Seen before = f.DecideBoth();
  EXPECT_EQ(before.http_generation, 1u);
  EXPECT_EQ(before.envoy_generation, 1u);
  EXPECT_EQ(before.http_burst, 10);
  EXPECT_EQ(before.envoy_limit, 5u);

  WriteFile(f.policy_path, PolicyText(20));
  WriteFile(f.yaml_path, Yaml(7));
  ASSERT_TRUE(f.runtime->Reload("test").empty());
  Seen after = f.DecideBoth();
  EXPECT_EQ(after.http_generation, 2u);
  EXPECT_EQ(after.envoy_generation, 2u);
  EXPECT_EQ(after.http_burst, 20);
  EXPECT_EQ(after.envoy_limit, 7u);
  // One swap: the view holds the policy and the Envoy configuration it installed.
  Runtime::View view = f.runtime->view();
  EXPECT_EQ(view.generation, 2u);
  ASSERT_NE(view.companion, nullptr);
  EXPECT_EQ(static_cast<const RlsAttached*>(view.companion.get())->config, f.decider->config());
  // The reload was counted once, as tollgate_rls_config_reloads_total.
  EXPECT_EQ(f.decider->counters().ServiceSnapshot().config_reloads, 1u);
}

// The interleaving a two-swap reload allowed (the policy swapped, then the
// Envoy configuration): inside the reload, after the new policy parsed and
// while the Envoy configuration compiles, both sides still decide with the
// old snapshot.
TEST(RlsRuntimeReload, NoDecisionSeesANewPolicyBesideAnOldEnvoyConfiguration) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.Open());
  std::vector<Seen> during;
  f.while_compiling = [&] { during.push_back(f.DecideBoth()); };
  WriteFile(f.policy_path, PolicyText(20));
  WriteFile(f.yaml_path, Yaml(7));
  ASSERT_TRUE(f.runtime->Reload("test").empty());
  ASSERT_EQ(during.size(), 1u);
  EXPECT_EQ(during[0].http_generation, 1u);
  EXPECT_EQ(during[0].http_burst, 10);
  EXPECT_EQ(during[0].envoy_generation, 1u);
  EXPECT_EQ(during[0].envoy_limit, 5u);
  f.while_compiling = nullptr;
  Seen after = f.DecideBoth();
  EXPECT_EQ(after.http_generation, after.envoy_generation);
  EXPECT_EQ(after.http_burst, 20);
  EXPECT_EQ(after.envoy_limit, 7u);
}

// A reload whose Envoy configuration fails installs the valid policy neither.
TEST(RlsRuntimeReload, AFailedEnvoyConfigurationInstallsNeitherSide) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.Open());
  WriteFile(f.policy_path, PolicyText(20));
  WriteFile(f.yaml_path,
            "domain: api\ndescriptors: [{key: user, rate_limit: {unit: fortnight}}]\n");
  std::vector<ConfigError> errors = f.runtime->Reload("test");
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].path.rfind("rls_config: ", 0), 0u) << errors[0].ToString();
  Seen after = f.DecideBoth();
  EXPECT_EQ(after.http_generation, 1u);
  EXPECT_EQ(after.envoy_generation, 1u);
  EXPECT_EQ(after.http_burst, 10);
  EXPECT_EQ(after.envoy_limit, 5u);
  EXPECT_EQ(f.decider->counters().ServiceSnapshot().config_reloads, 0u);
}

}  // namespace
}  // namespace tollgate::rls
