// A reload is ONE swap for HTTP and Envoy, under concurrency: while a writer
// reloads a Runtime (local store, ManualClock) over and over, each time with
// a new HTTP policy and new Envoy rule files, readers decide on both paths
// and read the Runtime's view. Step v of the writer gives the HTTP rule a
// burst of kBurst + v and the Envoy rule kPerMinute + v, and installs
// generation v + 1, so every observation names its generation and the limits
// it must come with. A reader that ever saw a policy of one step beside an
// Envoy configuration of another (a reload made of two swaps) fails here;
// HTTP and Envoy decide on the one Enforcer (the Envoy front end's rules are
// counted apart from the policy's). Labelled concurrency: TSan runs it.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "rls/rls_config.h"
#include "rls/rls_decider.h"
#include "testing/scoped_temp_dir.h"
#include "tollgate/envoy_rls.h"
#include "tollgate/request.h"
#include "tollgate/runtime.h"

namespace tollgate::rls {
namespace {

using testing::ScopedTempDir;

constexpr int kBurst = 10;
constexpr int kPerMinute = 100;
constexpr int kReloads = 40;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

std::string PolicyText(int step) {
  return R"({"rules": [{"name": "all", "limit_keys": ["const:all"],
             "algorithm": "token_bucket",
             "algorithm_config": {"rps": 1, "burst": )" +
         std::to_string(kBurst + step) + "}}]}";
}

std::string Yaml(int step) {
  return "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
         "requests_per_unit: " +
         std::to_string(kPerMinute + step) + "}\n";
}

rlspb::RateLimitRequest UserRequest() {
  rlspb::RateLimitRequest r;
  r.set_domain("api");
  auto* e = r.add_descriptors()->add_entries();
  e->set_key("user");
  e->set_value("u1");
  return r;
}

// The step a generation was installed by (generation 1: the start, step 0).
int StepOf(uint64_t generation) { return static_cast<int>(generation) - 1; }

struct Engine {
  ScopedTempDir dir;
  std::string policy_path = dir.File("policy.json");
  std::string yaml_path = dir.File("api.yaml");
  ManualClock clock;
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<EnvoyDecider> envoy;

  void Open() {
    WriteFile(policy_path, PolicyText(0));
    WriteFile(yaml_path, Yaml(0));
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
    // tollgated's path (server/grpc_frontend.cc): the rule files as the
    // Runtime's companion, decided on its one Enforcer.
    auto decider = AttachEnvoyDecider(*runtime, {yaml_path}, {}, &clock, {});
    ASSERT_TRUE(decider.ok()) << decider.status().ToString();
    envoy = std::move(decider).value();
  }

  // An Envoy decision: its generation and the limit it decided by.
  std::pair<uint64_t, uint32_t> DecideEnvoy() {
    rlspb::RateLimitResponse response;
    uint64_t generation = 0;
    std::promise<Status> done;
    envoy->Decide(
        UserRequest(), &response, [&](Status st) { done.set_value(std::move(st)); }, &generation);
    Status st = done.get_future().get();
    EXPECT_TRUE(st.ok()) << st.ToString();
    const uint32_t limit = response.statuses_size() == 1
                               ? response.statuses(0).current_limit().requests_per_unit()
                               : 0;
    return {generation, limit};
  }

  // An HTTP decision: its generation and the burst it decided by.
  std::pair<uint64_t, int64_t> DecideHttp() {
    RequestView request{"GET", "/api/items", "", "192.0.2.1", {}};
    CheckOutcome outcome = runtime->enforcer().Check(request);
    const int64_t burst =
        !outcome.rules.empty() && outcome.rules[0].limit ? outcome.rules[0].limit->burst() : -1;
    return {outcome.policy_generation, burst};
  }
};

// The view's policy and Envoy configuration: the step each was written by.
std::pair<int, int> StepsOfView(const Runtime::View& view) {
  std::vector<RuleSummary> rules = SummarizePolicy(*view.policy);
  const int policy_step =
      rules.size() == 1 ? static_cast<int>(rules[0].limit.burst()) - kBurst : -1;
  int envoy_step = -1;
  if (const auto* attached = static_cast<const RlsAttached*>(view.companion.get())) {
    const RlsMatch match = attached->config->MatchForKey("api", {{"user", "u1"}});
    if (match.rule != nullptr) {
      envoy_step = static_cast<int>(match.rule->requests_per_unit) - kPerMinute;
    }
  }
  return {policy_step, envoy_step};
}

TEST(RlsRuntimeSwap, NoReaderSeesAPolicyBesideAnotherGenerationsEnvoyConfiguration) {
  Engine e;
  ASSERT_NO_FATAL_FAILURE(e.Open());
  std::atomic<bool> done{false};
  std::atomic<int> mixed_views{0}, http_mismatches{0}, envoy_mismatches{0};
  std::atomic<int> observations{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      // At least a few rounds each, however fast the writer is.
      for (int round = 0; round < 5 || !done.load(); ++round) {
        const Runtime::View view = e.runtime->view();
        const auto [policy_step, envoy_step] = StepsOfView(view);
        if (policy_step != StepOf(view.generation) || envoy_step != StepOf(view.generation)) {
          ++mixed_views;
        }
        const auto [http_generation, burst] = e.DecideHttp();
        if (burst != kBurst + StepOf(http_generation)) ++http_mismatches;
        const auto [envoy_generation, limit] = e.DecideEnvoy();
        if (static_cast<int>(limit) != kPerMinute + StepOf(envoy_generation)) ++envoy_mismatches;
        ++observations;
      }
    });
  }
  for (int step = 1; step <= kReloads; ++step) {
    WriteFile(e.policy_path, PolicyText(step));
    WriteFile(e.yaml_path, Yaml(step));
    std::vector<ConfigError> errors = e.runtime->Reload("test");
    for (const ConfigError& error : errors) ADD_FAILURE() << error.ToString();
  }
  done = true;
  for (std::thread& t : readers) t.join();
  EXPECT_GE(observations.load(), 10);
  EXPECT_EQ(mixed_views.load(), 0);
  EXPECT_EQ(http_mismatches.load(), 0);
  EXPECT_EQ(envoy_mismatches.load(), 0);

  // After the last reload both paths decide with its generation and limits.
  const uint64_t last = kReloads + 1;
  const auto [http_generation, burst] = e.DecideHttp();
  const auto [envoy_generation, limit] = e.DecideEnvoy();
  EXPECT_EQ(http_generation, last);
  EXPECT_EQ(envoy_generation, last);
  EXPECT_EQ(burst, kBurst + kReloads);
  EXPECT_EQ(limit, static_cast<uint32_t>(kPerMinute + kReloads));
  EXPECT_EQ(e.runtime->view().generation, last);
}

// One Enforcer for both front ends, their rules counted apart: an HTTP rule
// and an Envoy rule of the same name share neither counters nor a bucket.
TEST(RlsRuntimeSwap, HttpAndEnvoyDecideOnOneEnforcerWithTheirOwnCounters) {
  Engine e;
  ASSERT_NO_FATAL_FAILURE(e.Open());
  // The policy's rule takes the name of the Envoy rule's stats key.
  WriteFile(e.policy_path, R"({"rules": [{"name": "api.user", "limit_keys": ["const:all"],
      "algorithm": "token_bucket", "algorithm_config": {"rps": 1, "burst": 2}}]})");
  ASSERT_TRUE(e.runtime->Reload("test").empty());
  for (int i = 0; i < 3; ++i) e.DecideHttp();  // 2 allowed, 1 rejected
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e.DecideEnvoy().second, uint32_t(kPerMinute));
  uint64_t http_allowed = 0, http_rejected = 0;
  for (const RuleCounters& c : e.runtime->enforcer().Counters()) {
    if (c.rule != "api.user") continue;
    http_allowed += c.allowed;
    http_rejected += c.rejected;
  }
  EXPECT_EQ(http_allowed, 2u);
  EXPECT_EQ(http_rejected, 1u);
  uint64_t envoy_allowed = 0;
  for (const RuleCounters& c : e.envoy->DecisionCounters()) {
    if (c.rule == "api.user") envoy_allowed += c.allowed;
  }
  EXPECT_EQ(envoy_allowed, 4u);
}

}  // namespace
}  // namespace tollgate::rls
