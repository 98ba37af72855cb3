// tollgate::Runtime without a socket: a local store, a ManualClock and a
// policy text (inline or a file). Decisions through its Enforcer, a reload
// seen whole (policy and generation together, on_reloaded after the swap), a
// failed PUT changing nothing (source bytes, generation, bucket state), a
// PUT's dry run, the file watch's stamps, the policy's metrics, key
// administration on the store (the store calls, and tollgate/key_admin.h: a
// request body resolved against the running policy and applied), rollback
// administration (tollgate/rollback_admin.h), and the static checks.
#include "tollgate/runtime.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "testing/scoped_temp_dir.h"
#include "tollgate/key_admin.h"
#include "tollgate/request.h"
#include "tollgate/rollback_admin.h"

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

// A key admin request body as tollgated's /v1/keys/* receive it.
KeyRequest KeyBody(std::string_view body, KeyAction action) {
  KeyRequest req;
  std::vector<ConfigError> errors = ParseKeyRequest(body, action, &req);
  EXPECT_TRUE(errors.empty()) << body << ": " << errors.at(0).ToString();
  return req;
}

TEST(Runtime, AdministerKeyNamesKeysByValuesOrSources) {
  Fixture f;
  ASSERT_TRUE(f.Open({.text = PolicyText(3)}).ok());
  ASSERT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());
  ASSERT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());

  KeyAdminResult got =
      AdministerKey(*f.runtime, KeyAction::kGet,
                    KeyBody(R"({"rule": "per-ip", "values": ["192.0.2.1"]})", KeyAction::kGet));
  ASSERT_EQ(got.outcome, KeyAdminResult::Outcome::kOk) << got.why;
  ASSERT_TRUE(got.key && got.before);
  EXPECT_EQ(got.key->rule, "per-ip");
  EXPECT_EQ(got.before->remaining, 1);
  EXPECT_FALSE(got.after);  // a look changes nothing
  nlohmann::json answer = KeyAdminAnswer(got, KeyAction::kGet, "shown");
  EXPECT_EQ(answer["key"], "shown");
  EXPECT_EQ(answer["before"]["used"], 2);
  EXPECT_EQ(answer["limit_keys"], nlohmann::json::array({"ip:address"}));
  EXPECT_FALSE(answer.contains("after"));

  // By source, as "keys": {"ip:address": ...}: the same bucket the Enforcer decides on.
  KeyAdminResult set = AdministerKey(
      *f.runtime, KeyAction::kSet,
      KeyBody(R"({"rule": "per-ip", "keys": {"ip:address": "192.0.2.1"}, "remaining": 0})",
              KeyAction::kSet));
  ASSERT_EQ(set.outcome, KeyAdminResult::Outcome::kOk) << set.why;
  EXPECT_EQ(set.before->remaining, 1);
  ASSERT_TRUE(set.after);
  EXPECT_EQ(set.after->remaining, 0);
  EXPECT_EQ(KeyAdminAnswer(set, KeyAction::kSet, "k")["after"]["remaining"], 0);
  EXPECT_FALSE(Decide(*f.runtime, "192.0.2.1").allowed());
  EXPECT_TRUE(Decide(*f.runtime, "192.0.2.2").allowed());  // another key, untouched

  KeyAdminResult reset =
      AdministerKey(*f.runtime, KeyAction::kReset,
                    KeyBody(R"({"rule": "per-ip", "values": ["192.0.2.1"]})", KeyAction::kReset));
  ASSERT_EQ(reset.outcome, KeyAdminResult::Outcome::kOk) << reset.why;
  EXPECT_EQ(reset.before->remaining, 0);
  EXPECT_EQ(reset.after->remaining, 3);
  EXPECT_EQ(Decide(*f.runtime, "192.0.2.1").rules.at(0).decision.remaining, 2);
}

TEST(Runtime, AdministerKeyRefusesWithTheFieldAndLeavesTheKey) {
  Fixture f;
  ASSERT_TRUE(f.Open({.text = PolicyText(3)}).ok());
  ASSERT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());

  KeyAdminResult unknown =
      AdministerKey(*f.runtime, KeyAction::kReset,
                    KeyBody(R"({"rule": "nope", "values": ["x"]})", KeyAction::kReset));
  EXPECT_EQ(unknown.outcome, KeyAdminResult::Outcome::kUnknownRule);
  EXPECT_FALSE(unknown.key);

  // Out of the rule's 0..burst: refused before the store is asked.
  KeyAdminResult over = AdministerKey(
      *f.runtime, KeyAction::kSet,
      KeyBody(R"({"rule": "per-ip", "values": ["192.0.2.1"], "remaining": 4})", KeyAction::kSet));
  ASSERT_EQ(over.outcome, KeyAdminResult::Outcome::kInvalid);
  ASSERT_EQ(over.errors.size(), 1u);
  EXPECT_EQ(over.errors[0].path, "remaining");
  EXPECT_TRUE(over.key);
  EXPECT_FALSE(over.before);

  KeyAdminResult wrong_source = AdministerKey(
      *f.runtime, KeyAction::kReset,
      KeyBody(R"({"rule": "per-ip", "keys": {"header:x-api-key": "k"}})", KeyAction::kReset));
  ASSERT_EQ(wrong_source.outcome, KeyAdminResult::Outcome::kInvalid);
  ASSERT_EQ(wrong_source.errors.size(), 2u);
  EXPECT_EQ(wrong_source.errors[0].path, "keys.header:x-api-key");
  EXPECT_EQ(wrong_source.errors[1].path, "keys");  // ip:address has no value

  KeyAdminResult two_values =
      AdministerKey(*f.runtime, KeyAction::kReset,
                    KeyBody(R"({"rule": "per-ip", "values": ["a", "b"]})", KeyAction::kReset));
  ASSERT_EQ(two_values.outcome, KeyAdminResult::Outcome::kInvalid);
  EXPECT_EQ(two_values.errors.at(0).path, "values");
  // Nothing of it reached the store: the key has what the one request left.
  EXPECT_EQ(Decide(*f.runtime, "192.0.2.1").rules.at(0).decision.remaining, 1);

  KeyRequest req;
  std::vector<ConfigError> errors =
      ParseKeyRequest(R"({"values": [1], "remaining": 2})", KeyAction::kReset, &req);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].path, "remaining");  // only set takes it
  EXPECT_EQ(errors[1].path, "rule");
  EXPECT_EQ(errors[2].path, "values[0]");
}

TEST(Runtime, PreviewPolicyChangesNothing) {
  Fixture f;
  ASSERT_TRUE(f.Open({.text = PolicyText(4)}).ok());
  const std::string version = f.runtime->policies().version();
  Runtime::PolicyPreview preview = f.runtime->PreviewPolicy(PolicyText(9));
  EXPECT_TRUE(preview.errors.empty());
  EXPECT_EQ(preview.version_before, version);
  EXPECT_NE(preview.version, version);
  ASSERT_EQ(preview.changes.size(), 1u);
  EXPECT_EQ(preview.changes[0].rule, "per-ip");
  EXPECT_FALSE(f.runtime->PreviewPolicy(R"({"rules": [{"name": "x"}]})").errors.empty());
  EXPECT_EQ(f.runtime->view().generation, 1u);
  EXPECT_EQ(f.runtime->policies().version(), version);
}

TEST(Runtime, SourceChangedSeesThePolicyFileAndTheWatchedFiles) {
  ScopedTempDir dir;
  const std::string path = dir.File("policy.json");
  const std::string rules = dir.File("rules");
  std::filesystem::create_directory(rules);
  WriteFile(rules + "/a.yaml", "domain: a\n");
  WriteFile(path, PolicyText(2));
  Fixture f;
  ASSERT_TRUE(f.Open({.location = path, .watch_files = {rules}}).ok());
  EXPECT_FALSE(f.runtime->SourceChanged());  // as Create saw them

  WriteFile(path, PolicyText(20));
  EXPECT_TRUE(f.runtime->SourceChanged());
  EXPECT_FALSE(f.runtime->SourceChanged());  // seen once
  WriteFile(rules + "/b.yml", "domain: b\n");
  EXPECT_TRUE(f.runtime->SourceChanged());  // a file added to a watched directory
  WriteFile(rules + "/notes.txt", "not a rule file");
  EXPECT_FALSE(f.runtime->SourceChanged());

  WriteFile(path, PolicyText(200));
  f.runtime->MarkSourceSeen();  // a SIGHUP reload reads these bytes
  EXPECT_FALSE(f.runtime->SourceChanged());
  std::filesystem::remove(path);
  EXPECT_FALSE(f.runtime->SourceChanged());  // an unreadable file is no change

  WriteFile(path, PolicyText(2));
  ASSERT_TRUE(f.runtime->SourceChanged());
  // What a PUT wrote is no change for the watch.
  ASSERT_TRUE(f.runtime->PutPolicy(PolicyText(30), "tester").empty());
  EXPECT_FALSE(f.runtime->SourceChanged());
}

TEST(Runtime, CountsReloadsInItsPolicyMetrics) {
  ScopedTempDir dir;
  const std::string path = dir.File("policy.json");
  WriteFile(path, PolicyText(2));
  Fixture f;
  ASSERT_TRUE(f.Open({.location = path}).ok());
  WriteFile(path, PolicyText(3));
  ASSERT_TRUE(f.runtime->Reload("test").empty());
  WriteFile(path, "{ not json");
  ASSERT_FALSE(f.runtime->Reload("test").empty());
  PrometheusWriter w;
  f.runtime->WritePolicyMetrics(w);
  const std::string text = w.Take();
  EXPECT_NE(text.find("tollgate_policy_reloads_total{result=\"success\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("tollgate_policy_reloads_total{result=\"failure\"} 1"), std::string::npos);
  EXPECT_NE(text.find("tollgate_policy_generation 2"), std::string::npos);
  EXPECT_NE(text.find("tollgate_policy_last_reload_success 0"), std::string::npos);
  EXPECT_NE(text.find("source=\"file:" + path + "\""), std::string::npos);
}

TEST(Runtime, AdministersRollbackGuardsOnItsEnforcer) {
  Fixture f;
  ASSERT_TRUE(f.Open({.text = PolicyText(1)}).ok());
  ASSERT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());  // the one token
  EXPECT_FALSE(AdministerRollback(*f.runtime, "nope", true, "").done);
  RollbackActionResult tripped = AdministerRollback(*f.runtime, "per-ip", true, "bad deploy");
  ASSERT_TRUE(tripped.done);
  EXPECT_FALSE(tripped.before.rolled_back);
  EXPECT_FALSE(tripped.fleet);  // the local store: this instance only
  // Tripped: the rule decides in shadow, so an empty bucket lets requests pass.
  EXPECT_TRUE(Decide(*f.runtime, "192.0.2.1").allowed());
  nlohmann::json view = RollbackViewJson(*f.runtime, f.clock.Now());
  EXPECT_EQ(view["scope"], "instance");
  ASSERT_EQ(view["rules"].size(), 1u);
  EXPECT_EQ(view["rules"][0]["tripped"], true);
  EXPECT_EQ(view["rules"][0]["reason"], "tripped by an operator: bad deploy");
  EXPECT_EQ(view["rules"][0]["trigger"], "admin");
  EXPECT_EQ(TrippedRulesJson(f.runtime->enforcer().Counters()).size(), 1u);

  RollbackActionResult cleared = AdministerRollback(*f.runtime, "per-ip", false, "");
  ASSERT_TRUE(cleared.done);
  EXPECT_TRUE(cleared.before.rolled_back);
  EXPECT_FALSE(Decide(*f.runtime, "192.0.2.1").allowed());  // enforced again
  EXPECT_TRUE(TrippedRulesJson(f.runtime->enforcer().Counters()).empty());
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

  options.policy.location = "zookeeper://127.0.0.1:2181/k";  // etcds:// is served since issue 35
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
