// tollgate::Runtime without a socket: a local store, a ManualClock and a
// policy text (inline or a file). Decisions through its Enforcer, a reload
// seen whole (policy and generation together, on_reloaded after the swap), a
// failed PUT changing nothing (source bytes, generation, bucket state), key
// administration on the store, and the static checks.
#include "tollgate/runtime.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "testing/scoped_temp_dir.h"
#include "tollgate/request.h"

namespace tollgate {
namespace {

using testing::ScopedTempDir;

// Per client address: a bucket of `burst` refilling 1 a second.
std::string PolicyText(int burst) {
  return R"({"rules": [{"name": "per-ip", "limit_keys": ["ip:address"],
             "algorithm": "token_bucket",
             "algorithm_config": {"rps": 1, "burst": )" +
         std::to_string(burst) + "}}]}";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

CheckOutcome Decide(Runtime& runtime, const char* peer) {
  RequestView request{"GET", "/api/items", "", peer, {}};
  return runtime.enforcer().Check(request);
}

struct Events {
  std::vector<std::string> names;
  std::vector<std::string> fields;
};

struct Fixture {
  ManualClock clock;
  Events events;
  std::vector<std::vector<ConfigError>> reloads;  // what on_reloaded saw
  std::vector<uint64_t> generation_at_reload;     // view().generation inside on_reloaded
  std::unique_ptr<Runtime> runtime;

  Status Open(PolicySourceOptions policy) {
    RuntimeOptions options;
    options.policy = std::move(policy);
    options.store.url = "local";
    RuntimeEnv env;
    env.clock = &clock;
    env.io_clock = &clock;
    env.on_event = [this](const RuntimeEvent& e) {
      events.names.emplace_back(e.name);
      events.fields.emplace_back(e.fields);
    };
    env.on_reloaded = [this](const std::vector<ConfigError>& errors) {
      reloads.push_back(errors);
      generation_at_reload.push_back(runtime->view().generation);
    };
    auto made = Runtime::Create(std::move(options), std::move(env));
    if (!made.ok()) return made.status();
    runtime = std::move(made).value();
    return Status::Ok();
  }
};

TEST(Runtime, DecidesOnAnInlinePolicyWithTheInjectedClock) {
  Fixture f;
  ASSERT_TRUE(f.Open({.text = PolicyText(3)}).ok());
  EXPECT_EQ(f.runtime->policy_source(), "inline");
  EXPECT_EQ(f.runtime->view().generation, 1u);
  EXPECT_TRUE(f.runtime->Ready());
  for (int i = 0; i < 3; ++i) {
    CheckOutcome o = Decide(*f.runtime, "192.0.2.1");
    ASSERT_TRUE(o.allowed()) << i;
    EXPECT_EQ(o.rules.at(0).decision.remaining, 2 - i);
  }
  EXPECT_EQ(Decide(*f.runtime, "192.0.2.1").http_status, 429);
  EXPECT_TRUE(Decide(*f.runtime, "192.0.2.2").allowed());  // its own bucket
  f.clock.Advance(std::chrono::milliseconds(999));
  EXPECT_FALSE(Decide(*f.runtime, "192.0.2.1").allowed());
  f.clock.Advance(std::chrono::milliseconds(1));  // one token a second
  EXPECT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());
}

TEST(Runtime, ReloadIsSeenWholeBeforeOnReloadedRuns) {
  ScopedTempDir dir;
  const std::string path = dir.File("policy.json");
  WriteFile(path, PolicyText(2));
  Fixture f;
  ASSERT_TRUE(f.Open({.location = path}).ok());
  EXPECT_EQ(f.runtime->policy_source(), "file:" + path);
  EXPECT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());
  EXPECT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());
  EXPECT_FALSE(Decide(*f.runtime, "192.0.2.1").allowed());

  WriteFile(path, PolicyText(50));
  EXPECT_TRUE(f.runtime->Reload("test").empty());
  ASSERT_EQ(f.reloads.size(), 1u);
  EXPECT_TRUE(f.reloads[0].empty());
  // The new policy was live, with its generation, when the host was told.
  EXPECT_EQ(f.generation_at_reload[0], 2u);
  Runtime::View view = f.runtime->view();
  EXPECT_EQ(view.generation, 2u);
  EXPECT_EQ(view.policy, f.runtime->policies().Current());
  EXPECT_EQ(Decide(*f.runtime, "192.0.2.9").rules.at(0).decision.remaining, 49);
  ASSERT_FALSE(f.events.names.empty());
  EXPECT_EQ(f.events.names.back(), "policy_reloaded");
  EXPECT_NE(f.events.fields.back().find("\"generation\":2"), std::string::npos)
      << f.events.fields.back();
  EXPECT_NE(f.events.fields.back().find("\"trigger\":\"test\""), std::string::npos);

  // A broken file: the running policy stays, the host hears of the failure.
  WriteFile(path, "{ not json");
  EXPECT_FALSE(f.runtime->Reload("test").empty());
  ASSERT_EQ(f.reloads.size(), 2u);
  EXPECT_FALSE(f.reloads[1].empty());
  EXPECT_EQ(f.runtime->view().generation, 2u);
  EXPECT_EQ(f.events.names.back(), "policy_reload_failed");
}

TEST(Runtime, FailedPutChangesNothing) {
  ScopedTempDir dir;
  const std::string path = dir.File("policy.json");
  const std::string before = PolicyText(4);
  WriteFile(path, before);
  Fixture f;
  ASSERT_TRUE(f.Open({.location = path}).ok());
  EXPECT_EQ(Decide(*f.runtime, "192.0.2.1").rules.at(0).decision.remaining, 3);

  bool written = true;
  std::vector<ConfigError> errors =
      f.runtime->PutPolicy(R"({"rules": [{"name": "x"}]})", "tester", &written);
  EXPECT_FALSE(errors.empty());
  EXPECT_FALSE(written);
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_EQ(f.runtime->view().generation, 1u);
  EXPECT_TRUE(f.reloads.empty());  // nothing was installed, nothing to tell
  EXPECT_EQ(f.events.names.back(), "policy_put_failed");
  // The bucket kept its state: the next request takes the next token.
  EXPECT_EQ(Decide(*f.runtime, "192.0.2.1").rules.at(0).decision.remaining, 2);

  // A valid PUT is written back and live at once.
  const std::string after = PolicyText(9);
  EXPECT_TRUE(f.runtime->PutPolicy(after, "tester", &written).empty());
  EXPECT_TRUE(written);
  EXPECT_EQ(ReadFile(path), after);
  EXPECT_EQ(f.runtime->view().generation, 2u);
  EXPECT_EQ(f.runtime->policies().text(), after);
}

TEST(Runtime, AdministersKeysOnItsStore) {
  Fixture f;
  ASSERT_TRUE(f.Open({.text = PolicyText(3)}).ok());
  ASSERT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());
  const std::vector<std::optional<std::string>> values = {"192.0.2.1"};
  RuleKeyResult found = KeyForRule(*f.runtime->view().policy, "per-ip", values);
  ASSERT_TRUE(found.key) << found.status.ToString();
  const RuleKey& rule = *found.key;
  auto seen = f.runtime->InspectKey(rule.bucket_key, rule.limit);
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->remaining, 2);
  ASSERT_TRUE(f.runtime->ResetKey(rule.bucket_key, rule.limit).ok());
  EXPECT_EQ(f.runtime->InspectKey(rule.bucket_key, rule.limit)->remaining, 3);
  auto set = f.runtime->SetRemaining(rule.bucket_key, rule.limit, 0);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_FALSE(Decide(*f.runtime, "192.0.2.1").allowed());
  PrometheusWriter w;
  f.runtime->WriteStoreMetrics(w);
  EXPECT_NE(w.Take().find("tollgate_store_keys{store=\"local\"}"), std::string::npos);
}

TEST(Runtime, CheckNamesEveryProblemWithItsPath) {
  ScopedTempDir dir;
  const std::string path = dir.File("policy.json");
  WriteFile(path, R"({"rules": [{"name": "x"}]})");
  RuntimeOptions options;
  options.policy.location = path;
  options.store.url = "memcached://127.0.0.1";
  std::vector<ConfigError> errors = Runtime::Check(options);
  ASSERT_GE(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "store");
  EXPECT_EQ(errors[1].path.rfind(path + ": ", 0), 0u) << errors[1].path;

  options.policy.location = "etcds://127.0.0.1:2379/k";
  options.store.url = "local";
  errors = Runtime::Check(options);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "policy");
  // Create refuses what Check refuses, as a configuration problem.
  options.policy.location = path;
  auto made = Runtime::Create(options);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tollgate
