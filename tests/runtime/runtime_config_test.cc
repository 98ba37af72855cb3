// RuntimeConfig (tollgate/runtime_config.h): an embedder loads tollgated's own
// config file and gets the engine's options, with tollgated's keys ignored and
// the engine's errors at the same paths tollgated reports.
#include "tollgate/runtime_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "testing/scoped_temp_dir.h"
#include "testing/test_paths.h"

namespace tollgate {
namespace {

std::string Paths(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const auto& e : errors) out += e.ToString() + "\n";
  return out;
}

TEST(RuntimeConfig, TollgatedsExampleConfigGivesTheEngineOptions) {
  RuntimeConfig c;
  auto errors = LoadRuntimeConfigFile(testing::SourcePathOf("examples/tollgated.json"), &c);
  ASSERT_TRUE(errors.empty()) << Paths(errors);
  EXPECT_TRUE(ValidateRuntimeConfig(c).empty()) << Paths(ValidateRuntimeConfig(c));
  EXPECT_EQ(c.policy_path, "examples/policy.json");
  EXPECT_EQ(c.store, "local");
  EXPECT_EQ(c.trusted_proxies, (std::vector<std::string>{"127.0.0.1", "::1"}));
  auto options = RuntimeOptionsOf(c);
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->policy.location, "examples/policy.json");
  EXPECT_EQ(options->store.url, "local");
  EXPECT_EQ(options->store.local.max_keys, size_t{1} << 20);
  ASSERT_TRUE(options->store.resilience.has_value());
  EXPECT_EQ(options->store.resilience->breaker.open_duration, std::chrono::milliseconds(250));
  EXPECT_EQ(options->enforcer.header_styles, std::vector<HeaderStyle>{HeaderStyle::kDraft11});
  EXPECT_TRUE(options->fleet.share_rollback);
}

TEST(RuntimeConfig, ReadsTheEngineKeysAndLeavesTollgatedsAlone) {
  RuntimeConfig c;
  auto errors = ParseRuntimeConfig(R"({
      "policy": "etcd://127.0.0.1:2379/tollgate/policy", "policy_value_dir": "/srv/values",
      "policy_remote_files": true, "listen": "0.0.0.0:8080", "tls": {"cert_file": "x"},
      "grpc": {"listen": ":8081", "rls_config": ["a.yaml"], "headers": ["draft11"],
               "retry_after": false, "default_algorithm": "sliding_window"},
      "store": {"url": "redis://127.0.0.1:6379", "failure_mode": "degrade",
                "breaker": {"open_ms": 500}},
      "forwarded_header": "forwarded", "jwt": {"issuer": "me", "leeway_s": 5},
      "http": {"max_header_bytes": 4096}, "anything": "else"})",
                                   &c);
  ASSERT_TRUE(errors.empty()) << Paths(errors);
  EXPECT_EQ(c.policy_value_dir, "/srv/values");
  EXPECT_TRUE(c.policy_remote_files);
  EXPECT_EQ(c.rls_config, std::vector<std::string>{"a.yaml"});
  EXPECT_EQ(c.grpc_header_styles, std::vector<HeaderStyle>{HeaderStyle::kDraft11});
  EXPECT_FALSE(c.grpc_retry_after);
  EXPECT_EQ(c.rls_default_algorithm, Algorithm::kSlidingWindow);
  EXPECT_EQ(c.failure_mode, FailureMode::kDegrade);
  EXPECT_EQ(c.breaker_open, std::chrono::milliseconds(500));
  EXPECT_EQ(c.forwarded_header, ForwardedHeader::kForwarded);
  const EnforcerOptions o = MakeEnforcerOptions(c);
  EXPECT_EQ(o.jwt.issuer, "me");
  EXPECT_EQ(o.jwt.leeway, std::chrono::seconds(5));
  EXPECT_TRUE(ValidateRuntimeConfig(c).empty()) << Paths(ValidateRuntimeConfig(c));
}

TEST(RuntimeConfig, ErrorsNameTheirPaths) {
  RuntimeConfig c;
  auto errors = ParseRuntimeConfig(R"({
      "policy_poll_interval_ms": -1, "grpc": {"default_algorithm": "magic"},
      "store": {"failure_mode": "sometimes", "breaker": {"open_ms": 0, "typo": 1}},
      "failure_mode": "maybe", "headers": [], "forwarded_header": "via",
      "jwt": {"rs256_public_key_file": "/nonexistent/key.pem"}})",
                                   &c);
  std::string all = Paths(errors);
  for (const char* path :
       {"policy_poll_interval_ms: ", "grpc.default_algorithm: unknown algorithm \"magic\"",
        "store.failure_mode: must be open, closed or degrade", "store.breaker.open_ms: ",
        "store.breaker.typo: ", "failure_mode: must be open, closed or degrade",
        "headers: must be a style or a non-empty array of styles",
        "forwarded_header: must be x-forwarded-for or forwarded",
        "jwt.rs256_public_key_file: cannot read /nonexistent/key.pem: "}) {
    EXPECT_NE(all.find(path), std::string::npos) << path << "\n" << all;
  }
  EXPECT_EQ(errors.size(), 9u) << all;

  RuntimeConfig invalid;
  invalid.store = "redis://";
  invalid.grpc_retry_after_jitter = 11;
  all = Paths(ValidateRuntimeConfig(invalid));
  EXPECT_NE(all.find("policy: is required"), std::string::npos) << all;
  EXPECT_NE(all.find("grpc.retry_after_jitter: must be between 0 and 10"), std::string::npos)
      << all;
  EXPECT_NE(all.find("store: "), std::string::npos) << all;

  EXPECT_EQ(Paths(ParseRuntimeConfig("[1]", &c)), "must be a JSON object\n");
  EXPECT_EQ(Paths(ParseRuntimeConfig("{", &c)), "not valid JSON\n");
  EXPECT_EQ(Paths(ParseRuntimeConfig(R"({"grpc": 1})", &c)), "grpc: must be an object\n");
  EXPECT_EQ(Paths(LoadRuntimeConfigFile("/nonexistent/tollgated.json", &c)),
            "cannot open config file /nonexistent/tollgated.json\n");
}

TEST(RuntimeConfig, AnRs256KeyFileIsReadWhileParsing) {
  const testing::ScopedTempDir dir;
  std::ofstream(dir.File("key.pem")) << "-----BEGIN PUBLIC KEY-----\n";
  RuntimeConfig c;
  auto errors = ParseRuntimeConfig(
      R"({"jwt": {"rs256_public_key_file": ")" + dir.File("key.pem") + R"("}})", &c);
  ASSERT_TRUE(errors.empty()) << Paths(errors);
  EXPECT_EQ(c.jwt_rs256_public_key_pem, "-----BEGIN PUBLIC KEY-----\n");
  EXPECT_EQ(c.jwt_rs256_public_key_file, dir.File("key.pem"));
  // Not a key: refused by validation at the file's path, naming the file.
  auto invalid = ValidateRuntimeConfig(c);
  ASSERT_EQ(invalid.size(), 2u) << Paths(invalid);  // and no policy
  EXPECT_EQ(invalid[1].path, "jwt.rs256_public_key_file");
  EXPECT_NE(invalid[1].message.find(dir.File("key.pem")), std::string::npos);
}

}  // namespace
}  // namespace tollgate
