// Unit tests of tollgated's parts that need no sockets: config parsing and
// validation, the space-saving sketch, Prometheus text, trace context, log gate
// (the gateway framing has its own file, proxy_wire_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "policy/policy_test_util.h"
#include "server/config.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/secrets.h"
#include "testing/scoped_temp_dir.h"

namespace tollgate::server {
namespace {

TEST(ServerConfig, ParsesEveryFieldAndReportsErrorsWithPaths) {
  ServerConfig c;
  auto errors = ParseServerConfig(R"({
    "policy": "p.json", "listen": "0.0.0.0:8080", "threads": 4,
    "admin": {"listen": "127.0.0.1:9999", "token": "t-0123456789abcdef"},
    "store": {"url": "redis://127.0.0.1:6379", "failure_mode": "degrade", "timeout_ms": 20},
    "headers": "x-ratelimit", "trusted_proxies": ["10.0.0.0/8"],
    "http": {"max_header_bytes": 2048, "read_timeout_ms": 500},
    "gateway": {"upstream": "http://127.0.0.1:3000/base", "timeout_ms": 100},
    "log": {"level": "debug", "reject_sample": 10}
  })",
                                  &c);
  EXPECT_TRUE(errors.empty()) << errors[0].ToString();
  EXPECT_EQ(c.policy_path, "p.json");
  EXPECT_EQ(c.threads, 4);
  EXPECT_EQ(c.admin_listen, "127.0.0.1:9999");
  EXPECT_EQ(c.admin_token, "t-0123456789abcdef");
  EXPECT_EQ(c.store, "redis://127.0.0.1:6379");
  EXPECT_EQ(c.failure_mode, FailureMode::kDegrade);
  EXPECT_EQ(c.header_styles, std::vector<HeaderStyle>{HeaderStyle::kXRateLimit});
  EXPECT_EQ(c.max_header_bytes, 2048u);
  EXPECT_EQ(c.read_timeout, Millis(500));
  EXPECT_EQ(c.upstream_timeout, Millis(100));
  EXPECT_EQ(c.reject_log_sample, 10u);
  EXPECT_TRUE(ValidateServerConfig(c).empty());

  ServerConfig d;
  errors = ParseServerConfig(R"({"threads": "x", "http": {"max_header_bytes": 1, "bogus": 1},
                                 "gateway": 5, "typo": true})",
                             &d);
  std::vector<std::string> paths;
  for (const auto& e : errors) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"threads", "http.max_header_bytes", "http.bogus",
                                             "gateway", "typo"}));
  EXPECT_EQ(ParseServerConfig("{", &d).size(), 1u);
  EXPECT_EQ(ParseServerConfig("[]", &d).size(), 1u);
}

// The restart keys (issue 36): reuse_port and the state file's lock wait, typed and bounded.
TEST(ServerConfig, RestartKeys) {
  ServerConfig c;
  EXPECT_FALSE(c.reuse_port);  // a second tollgated by mistake fails instead of sharing the port
  EXPECT_TRUE(ParseServerConfig(R"({"reuse_port": true, "store": {"url": "local",
                                    "state_lock_wait_ms": 250}})",
                                &c)
                  .empty());
  EXPECT_TRUE(c.reuse_port);
  EXPECT_EQ(c.state_lock_wait, Millis(250));
  ServerConfig d;
  std::vector<std::string> paths;
  for (const auto& e : ParseServerConfig(R"({"reuse_port": "yes", "store": {"url": "local",
                                             "state_lock_wait_ms": -1}})",
                                         &d)) {
    paths.push_back(e.path);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"reuse_port", "store.state_lock_wait_ms"}));
}

TEST(ServerConfig, HeaderStyleListsShadowLogsAndGrpcRetryAfter) {
  ServerConfig c;
  auto errors = ParseServerConfig(R"({"policy": "p.json",
      "headers": ["draft11", "draft03", "x-ratelimit"],
      "log": {"shadow_sample": 2, "shadow_per_second": 5},
      "grpc": {"headers": ["draft11"], "retry_after": false, "retry_after_jitter": 0.25}})",
                                  &c);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  EXPECT_EQ(c.header_styles, (std::vector<HeaderStyle>{HeaderStyle::kDraft11, HeaderStyle::kDraft03,
                                                       HeaderStyle::kXRateLimit}));
  EXPECT_EQ(c.shadow_log_sample, 2u);
  EXPECT_EQ(c.shadow_logs_per_second, 5u);
  EXPECT_EQ(c.grpc_header_styles, std::vector<HeaderStyle>{HeaderStyle::kDraft11});
  EXPECT_FALSE(c.grpc_retry_after);
  EXPECT_EQ(c.grpc_retry_after_jitter, 0.25);
  EXPECT_TRUE(ValidateServerConfig(c).empty());
  EXPECT_EQ(MakeEnforcerOptions(c).header_styles,
            (std::vector<HeaderStyle>{HeaderStyle::kDraft11, HeaderStyle::kDraft03,
                                      HeaderStyle::kXRateLimit}));

  ServerConfig bad;
  errors = ParseServerConfig(R"({"headers": ["draft11", 3], "grpc": {"headers": []}})", &bad);
  std::vector<std::string> paths;
  for (const auto& e : errors) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"grpc.headers", "headers[1]"}));
  bad = ServerConfig();
  std::vector<std::string> messages;
  for (const auto& e : ParseServerConfig(R"({"policy": "p.json",
      "headers": "x-ratelimit,x-ratelimit-epoch", "grpc": {"headers": "none,draft11"}})",
                                         &bad)) {
    messages.push_back(e.ToString());
  }
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[0].find("grpc.headers: \"none\" cannot be combined"), std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find("headers: x-ratelimit and x-ratelimit-epoch"), std::string::npos)
      << messages[1];
}

TEST(ServerConfig, ListenerLimitsAndExposure) {
  ServerConfig c;
  auto errors = ParseServerConfig(R"({"decision_on_main": true, "metrics_on_main": false,
      "admin": {"max_connections": 5},
      "http": {"max_chunk_extension_bytes": 10, "max_trailer_bytes": 100,
               "max_connections_per_ip": 7, "body_timeout_ms": 1234, "lingering_close_ms": 0}})",
                                  &c);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  EXPECT_EQ(c.decision_on_main, true);
  EXPECT_EQ(c.metrics_on_main, false);
  EXPECT_EQ(c.admin_max_connections, 5u);
  EXPECT_EQ(c.max_chunk_extension_bytes, 10u);
  EXPECT_EQ(c.max_trailer_bytes, 100u);
  EXPECT_EQ(c.max_connections_per_ip, 7u);
  EXPECT_EQ(c.body_timeout, Millis(1234));
  EXPECT_EQ(c.lingering_close, Millis(0));
  EXPECT_EQ(ReadBufferLimit(c), c.max_header_bytes + 4096);
  ASSERT_TRUE(ParseServerConfig(R"({"decision_on_main": null})", &c).empty());
  EXPECT_FALSE(c.decision_on_main.has_value());
  errors = ParseServerConfig(R"({"metrics_on_main": "yes", "http": {"max_trailer_bytes": 1,
      "max_connections_per_ip": 0}, "admin": {"max_connections": 0}})",
                             &c);
  std::vector<std::string> paths;
  for (const auto& e : errors) paths.push_back(e.path);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"metrics_on_main", "admin.max_connections",
                                      "http.max_trailer_bytes", "http.max_connections_per_ip"}));
}

// examples/tollgated.json is the documented reference ("lists every field with
// its default"): it must load, validate, and show the defaults.
TEST(ServerConfig, ExampleConfigLoadsWithTheDefaults) {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  ServerConfig c;
  auto errors = LoadServerConfigFile(std::string(src ? src : ".") + "/examples/tollgated.json", &c);
  for (const auto& e : errors) ADD_FAILURE() << e.ToString();
  for (const auto& e : ValidateServerConfig(c)) ADD_FAILURE() << e.ToString();
  const ServerConfig d;
  EXPECT_EQ(c.policy_path, "examples/policy.json");
  EXPECT_EQ(c.policy_value_dir, d.policy_value_dir);
  EXPECT_EQ(c.policy_remote_files, d.policy_remote_files);
  EXPECT_EQ(c.listen, d.listen);
  EXPECT_EQ(c.store, d.store);
  EXPECT_EQ(c.failure_mode, d.failure_mode);
  EXPECT_EQ(c.store_timeout, d.store_timeout);
  EXPECT_EQ(c.charge_back, d.charge_back);
  EXPECT_EQ(c.call_deadline, d.call_deadline);
  EXPECT_EQ(c.local_state_file, d.local_state_file);
  EXPECT_EQ(c.state_save_interval, d.state_save_interval);
  EXPECT_EQ(c.state_lock_wait, d.state_lock_wait);
  EXPECT_EQ(c.reuse_port, d.reuse_port);
  EXPECT_EQ(c.breaker_consecutive_failures, d.breaker_consecutive_failures);
  EXPECT_EQ(c.breaker_failure_ratio, d.breaker_failure_ratio);
  EXPECT_EQ(c.breaker_min_calls, d.breaker_min_calls);
  EXPECT_EQ(c.breaker_window, d.breaker_window);
  EXPECT_EQ(c.breaker_open, d.breaker_open);
  EXPECT_EQ(c.breaker_half_open_probes, d.breaker_half_open_probes);
  EXPECT_EQ(c.grpc_listen, d.grpc_listen);
  EXPECT_EQ(c.grpc_header_styles, d.grpc_header_styles);
  EXPECT_EQ(c.rls_default_algorithm, d.rls_default_algorithm);
  EXPECT_EQ(c.jwt_hs256_secret, d.jwt_hs256_secret);
  EXPECT_EQ(c.jwt_rs256_public_key_pem, d.jwt_rs256_public_key_pem);
  EXPECT_EQ(c.jwt_issuer, d.jwt_issuer);
  EXPECT_EQ(c.jwt_audience, d.jwt_audience);
  EXPECT_EQ(c.jwt_leeway_s, d.jwt_leeway_s);
  EXPECT_EQ(c.jwt_verified_upstream, d.jwt_verified_upstream);
  EXPECT_EQ(c.header_styles, d.header_styles);
  EXPECT_EQ(c.max_header_bytes, d.max_header_bytes);
  EXPECT_EQ(c.decision_on_main, d.decision_on_main);
  EXPECT_EQ(c.metrics_on_main, d.metrics_on_main);
  EXPECT_EQ(c.admin_max_connections, d.admin_max_connections);
  EXPECT_EQ(c.max_chunk_extension_bytes, d.max_chunk_extension_bytes);
  EXPECT_EQ(c.max_trailer_bytes, d.max_trailer_bytes);
  EXPECT_EQ(c.max_connections_per_ip, d.max_connections_per_ip);
  EXPECT_EQ(c.body_timeout, d.body_timeout);
  EXPECT_EQ(c.lingering_close, d.lingering_close);
  EXPECT_EQ(c.upstream_timeout, d.upstream_timeout);
  EXPECT_EQ(c.abort_drain_timeout, d.abort_drain_timeout);
  EXPECT_EQ(c.abort_drain_bytes, d.abort_drain_bytes);
  EXPECT_FALSE(c.upstream_tls.any());
  EXPECT_EQ(c.upstream_tls_verify, d.upstream_tls_verify);
  EXPECT_EQ(c.top_capacity, d.top_capacity);
  EXPECT_EQ(c.trace_endpoint, d.trace_endpoint);
  EXPECT_EQ(c.trace_sample_ratio, d.trace_sample_ratio);
  EXPECT_EQ(c.trace_parent_based, d.trace_parent_based);
  EXPECT_EQ(c.trace_service_name, d.trace_service_name);
  EXPECT_EQ(c.trace_max_queue, d.trace_max_queue);
  EXPECT_EQ(c.trace_max_batch, d.trace_max_batch);
  EXPECT_EQ(c.trace_flush_interval, d.trace_flush_interval);
  EXPECT_EQ(c.trace_timeout, d.trace_timeout);
}

TEST(ServerConfig, TracingSectionIsReadAndChecked) {
  ServerConfig c;
  auto errors = ParseServerConfig(
      R"({"tracing": {"endpoint": "http://127.0.0.1:4318/v1/traces", "sample_ratio": 0.25,
          "parent_based": false, "max_queue": 10, "max_batch": 5, "timeout_ms": 500}})",
      &c);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.trace_endpoint, "http://127.0.0.1:4318/v1/traces");
  EXPECT_EQ(c.trace_sample_ratio, 0.25);
  EXPECT_FALSE(c.trace_parent_based);
  EXPECT_EQ(c.trace_max_queue, 10u);
  EXPECT_EQ(c.trace_timeout, Millis(500));
  ServerConfig bad;
  errors =
      ParseServerConfig(R"({"tracing": {"sample_ratio": 2, "max_queue": 0, "typo": 1}})", &bad);
  EXPECT_EQ(errors.size(), 3u);
  bad.policy_path = "p.json";
  bad.trace_endpoint = "https://collector:4318";
  bool named = false;
  for (const auto& e : ValidateServerConfig(bad)) named = named || e.path == "tracing.endpoint";
  EXPECT_TRUE(named);
}

// The client-abort drain (issue 29): 0 turns it off; negative, too long or not
// a number is refused with its path.
TEST(ServerConfig, AbortDrainIsReadAndBounded) {
  ServerConfig c;
  auto errors =
      ParseServerConfig(R"({"gateway": {"abort_drain_ms": 0, "abort_drain_bytes": 1024}})", &c);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.abort_drain_timeout, Millis(0));
  EXPECT_EQ(c.abort_drain_bytes, 1024u);
  ServerConfig bad;
  errors = ParseServerConfig(R"({"gateway": {"abort_drain_ms": 3600001, "abort_drain_bytes": -1}})",
                             &bad);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "gateway.abort_drain_ms");
  EXPECT_EQ(errors[1].path, "gateway.abort_drain_bytes");
  errors = ParseServerConfig(R"({"gateway": {"abort_drain_bytes": "8M"}})", &bad);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "gateway.abort_drain_bytes");
}

TEST(ServerConfig, ValidationCatchesBadValues) {
  // The enumerated fields are refused where they are parsed, the rest by validation.
  ServerConfig c;
  std::vector<std::string> paths;
  for (const auto& e : ParseServerConfig(R"({"listen": "nope", "store": "memcached://x",
      "failure_mode": "maybe", "headers": "draft99", "gateway": {"upstream": "ftp://x"},
      "log": {"level": "loud"}})",
                                         &c)) {
    paths.push_back(e.path);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"failure_mode", "headers", "log.level"}));
  paths.clear();
  for (const auto& e : ValidateServerConfig(c)) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"policy", "listen", "store", "gateway.upstream"}));
}

// gateway.upstream_tls (issue 35): read into the client settings, verification
// on unless said otherwise, and refused beside a plain (http://) upstream.
TEST(ServerConfig, UpstreamTlsIsReadAndNeedsAnHttpsUpstream) {
  ServerConfig c;
  auto errors = ParseServerConfig(R"({"gateway": {"upstream": "https://app:8443",
      "upstream_tls": {"ca_file": "/ca.pem", "server_name": "app.internal",
                       "cert_file": "/c.pem", "key_file": "/k.pem"}}})",
                                  &c);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(c.upstream_tls.ca_file, "/ca.pem");
  EXPECT_EQ(c.upstream_tls.server_name, "app.internal");
  EXPECT_EQ(c.upstream_tls.cert_file, "/c.pem");
  EXPECT_EQ(c.upstream_tls.key_file, "/k.pem");
  EXPECT_TRUE(c.upstream_tls_verify);
  std::vector<std::string> paths;
  for (const auto& e : ValidateServerConfig(c)) paths.push_back(e.path);
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "gateway.upstream_tls"), paths.end());
  ServerConfig plain;
  errors = ParseServerConfig(
      R"({"gateway": {"upstream": "http://app", "upstream_tls": {"verify": false}}})", &plain);
  EXPECT_TRUE(errors.empty());
  EXPECT_FALSE(plain.upstream_tls_verify);
  paths.clear();
  for (const auto& e : ValidateServerConfig(plain)) paths.push_back(e.path);
  EXPECT_NE(std::find(paths.begin(), paths.end(), "gateway.upstream_tls"), paths.end());
  errors = ParseServerConfig(R"({"gateway": {"upstream_tls": {"verify": "no", "cafile": "x"}}})",
                             &plain);
  paths.clear();
  for (const auto& e : errors) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"gateway.upstream_tls.verify",
                                             "gateway.upstream_tls.cafile"}));
}

// Token files are read by one strict reader, from the flag and the config file
// alike: exactly one non-empty line, an optional "\n" or "\r\n" after it.
TEST(AdminToken, FilesAreStrictlyParsedTheSameFromFlagAndConfig) {
  const tollgate::testing::ScopedTempDir dir;
  const std::string good = "0123456789abcdef-token";
  struct Case {
    const char* name;
    std::string text;
    const char* error;  // "" = accepted as `good`
  };
  const Case cases[] = {
      {"plain", good, ""},
      {"lf", good + "\n", ""},
      {"crlf", good + "\r\n", ""},
      {"empty", "", "is empty"},
      {"blank-first-line", "\n" + good + "\n", "the first line is blank"},
      {"crlf-blank-first-line", "\r\n" + good, "the first line is blank"},
      {"only-newline", "\n", "the first line is blank"},
      {"two-lines", good + "\n" + good + "\n", "more than one line"},
      {"two-newlines", good + "\n\n", "more than one line"},
      {"bare-cr-inside", good + "\rx", "more than one line"},
      {"space-inside", "0123456789 abcdef-token", "whitespace"},
      {"tab-inside", "0123456789\tabcdef-token", "whitespace"},
      {"trailing-space", good + " \n", "whitespace"},
      {"non-ascii", "0123456789abcdef\xc3\xa9", "non-ASCII"},
      {"short", "short-token\n", "at least 16"},
      {"huge", std::string(5000, 'a'), "larger than"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(std::string(c.name) + ".token");
    std::ofstream(path, std::ios::binary) << c.text;
    // The flag's way (main.cc): ReadAdminTokenFile, then validation.
    ServerConfig flag;
    flag.policy_path = "p.json";
    std::string why;
    std::vector<ConfigError> flag_errors;
    if (!ReadAdminTokenFile(path, &flag, &why)) {
      flag_errors.push_back({"admin.token_file", why});
    } else {
      flag_errors = ValidateServerConfig(flag);
    }
    // The config file's way.
    ServerConfig file;
    file.policy_path = "p.json";
    std::vector<ConfigError> file_errors =
        ParseServerConfig(R"({"admin": {"token_file": ")" + path + R"("}})", &file);
    if (file_errors.empty()) file_errors = ValidateServerConfig(file);
    ASSERT_EQ(flag_errors.size(), file_errors.size());
    if (*c.error == '\0') {
      EXPECT_TRUE(flag_errors.empty()) << flag_errors[0].ToString();
      EXPECT_EQ(flag.admin_token, good);
      EXPECT_EQ(file.admin_token, good);
      continue;
    }
    ASSERT_EQ(flag_errors.size(), 1u);
    EXPECT_EQ(flag_errors[0].ToString(), file_errors[0].ToString());
    EXPECT_EQ(flag_errors[0].path, "admin.token_file");
    EXPECT_NE(flag_errors[0].message.find(path), std::string::npos) << flag_errors[0].message;
    EXPECT_NE(flag_errors[0].message.find(c.error), std::string::npos) << flag_errors[0].message;
    EXPECT_EQ(flag_errors[0].message.find("abcdef-token"), std::string::npos)
        << "the token must not be echoed: " << flag_errors[0].message;
  }
  ServerConfig missing;
  auto errors =
      ParseServerConfig(R"({"admin": {"token_file": ")" + dir.File("nope") + R"("}})", &missing);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("cannot open"), std::string::npos);
  errors = ParseServerConfig(R"({"admin": {"token": "x", "token_file": "y"}})", &missing);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].ToString(), "admin.token_file: set token_file or token, not both");
  // An inline token follows the same content rules.
  ServerConfig inline_token;
  inline_token.policy_path = "p.json";
  inline_token.admin_token = "s3cret";
  errors = ValidateServerConfig(inline_token);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "admin.token");
  EXPECT_NE(errors[0].message.find("at least 16"), std::string::npos);
}

TEST(AdminToken, RequiredWhenTheAdminListenerIsNotLoopback) {
  for (const char* loopback :
       {"127.0.0.1:0", "127.9.9.9:9090", "[::1]:0", "localhost:9090", "[::ffff:127.0.0.1]:9090"}) {
    ServerConfig c;
    c.policy_path = "p.json";
    c.admin_listen = loopback;
    EXPECT_TRUE(ValidateServerConfig(c).empty()) << loopback;
  }
  for (const char* exposed : {"0.0.0.0:9090", ":9090", "[::]:9090", "10.0.0.1:9090",
                              "admin.example:9090", "[::ffff:10.0.0.1]:9090", "128.0.0.1:9090"}) {
    SCOPED_TRACE(exposed);
    ServerConfig c;
    c.policy_path = "p.json";
    c.admin_listen = exposed;
    auto errors = ValidateServerConfig(c);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0].path, "admin.token_file");
    EXPECT_NE(errors[0].message.find("not a loopback address"), std::string::npos);
    EXPECT_NE(errors[0].message.find("allow_unauthenticated"), std::string::npos);
    c.admin_token = "0123456789abcdef";
    EXPECT_TRUE(ValidateServerConfig(c).empty());
    c.admin_token.clear();
    c.admin_allow_unauthenticated = true;  // the explicit opt-out
    EXPECT_TRUE(ValidateServerConfig(c).empty());
  }
  ServerConfig parsed;
  EXPECT_TRUE(ParseServerConfig(
                  R"({"admin": {"listen": "0.0.0.0:1", "allow_unauthenticated": true}})", &parsed)
                  .empty());
  EXPECT_TRUE(parsed.admin_allow_unauthenticated);
}

TEST(AdminToken, ComparisonIsExactAndIgnoresNoLength) {
  EXPECT_TRUE(SecretEquals("Bearer 0123456789abcdef", "Bearer 0123456789abcdef"));
  EXPECT_FALSE(SecretEquals("Bearer 0123456789abcdeF", "Bearer 0123456789abcdef"));
  EXPECT_FALSE(SecretEquals("Bearer 0123456789abcde", "Bearer 0123456789abcdef"));
  EXPECT_FALSE(SecretEquals("Bearer 0123456789abcdef ", "Bearer 0123456789abcdef"));
  EXPECT_FALSE(SecretEquals("", "Bearer 0123456789abcdef"));
}

TEST(ServerConfig, JwtRs256KeyFileIssuerAudienceLeeway) {
  tollgate::testing::RsaKey key;
  ASSERT_TRUE(key.ok());
  const tollgate::testing::ScopedTempDir dir;
  const std::string pem_path = dir.File("rs256.pem");
  { std::ofstream(pem_path) << key.PublicPem(); }
  ServerConfig c;
  const nlohmann::json doc = {{"policy", "p.json"},
                              {"jwt",
                               {{"rs256_public_key_file", pem_path},
                                {"issuer", "https://idp"},
                                {"audience", "api"},
                                {"leeway_s", 5}}}};
  auto errors = ParseServerConfig(doc.dump(), &c);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  EXPECT_EQ(c.jwt_rs256_public_key_pem, key.PublicPem());
  EXPECT_EQ(c.jwt_rs256_public_key_file, pem_path);
  EXPECT_TRUE(ValidateServerConfig(c).empty());

  // The options tollgated hands the Enforcer verify RS256 with the claim checks.
  const EnforcerOptions o = MakeEnforcerOptions(c);
  EXPECT_EQ(o.jwt.issuer, "https://idp");
  EXPECT_EQ(o.jwt.audience, "api");
  EXPECT_EQ(o.jwt.leeway, std::chrono::seconds(5));
  auto v = JwtVerifier::Create(o.jwt);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  constexpr int64_t kNow = 1'700'000'000;
  const nlohmann::json good = {{"iss", "https://idp"}, {"aud", "api"}, {"exp", kNow - 5}};
  EXPECT_TRUE((*v)->Verify(key.Mint(good), kNow).usable());  // exactly at the leeway
  nlohmann::json late = good;
  late["exp"] = kNow - 6;
  EXPECT_EQ((*v)->Verify(key.Mint(late), kNow).error, "expired");
  nlohmann::json early = good;
  early["nbf"] = kNow + 6;
  EXPECT_FALSE((*v)->Verify(key.Mint(early), kNow).usable());
  early["nbf"] = kNow + 5;
  EXPECT_TRUE((*v)->Verify(key.Mint(early), kNow).usable());
  nlohmann::json iss = good;
  iss["iss"] = "https://other";
  EXPECT_EQ((*v)->Verify(key.Mint(iss), kNow).error, "wrong issuer");
  nlohmann::json aud = good;
  aud["aud"] = "other";
  EXPECT_EQ((*v)->Verify(key.Mint(aud), kNow).error, "wrong audience");
  tollgate::testing::RsaKey other;
  EXPECT_EQ((*v)->Verify(other.Mint(good), kNow).state, JwtClaims::State::kInvalid);
  // HS256 is not configured: an HS256 token is not usable.
  EXPECT_FALSE((*v)->Verify(tollgate::testing::MintHs256(good, "x"), kNow).usable());

  // The same key inline.
  ServerConfig inl;
  const nlohmann::json inline_doc = {{"policy", "p.json"},
                                     {"jwt", {{"rs256_public_key_pem", key.PublicPem()}}}};
  EXPECT_TRUE(ParseServerConfig(inline_doc.dump(), &inl).empty());
  EXPECT_EQ(inl.jwt_rs256_public_key_pem, key.PublicPem());
  EXPECT_EQ(inl.jwt_leeway_s, 30);
  EXPECT_TRUE(ValidateServerConfig(inl).empty());
  EXPECT_EQ(MakeEnforcerOptions(inl).jwt.leeway, std::chrono::seconds(30));
}

TEST(ServerConfig, JwtRs256ErrorsHavePaths) {
  const tollgate::testing::ScopedTempDir dir;
  const std::string missing = dir.File("no_such.pem");
  ServerConfig c;
  nlohmann::json doc = {{"jwt", {{"rs256_public_key_file", missing}, {"leeway_s", -1}}}};
  auto errors = ParseServerConfig(doc.dump(), &c);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "jwt.rs256_public_key_file");
  EXPECT_EQ(errors[0].message, "cannot read " + missing + ": No such file or directory");
  EXPECT_EQ(errors[1].path, "jwt.leeway_s");
  EXPECT_TRUE(c.jwt_rs256_public_key_pem.empty());

  ServerConfig both;
  doc = {{"jwt", {{"rs256_public_key_file", missing}, {"rs256_public_key_pem", "x"}}}};
  errors = ParseServerConfig(doc.dump(), &both);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "jwt.rs256_public_key_file");

  // A readable file that is not a PEM public key: caught by validation.
  const std::string junk = dir.File("junk.pem");
  { std::ofstream(junk) << "not a key\n"; }
  ServerConfig bad;
  bad.policy_path = "p.json";
  doc = {{"jwt", {{"rs256_public_key_file", junk}, {"issuer", 7}}}};
  errors = ParseServerConfig(doc.dump(), &bad);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "jwt.issuer");
  auto invalid = ValidateServerConfig(bad);
  ASSERT_EQ(invalid.size(), 1u);
  EXPECT_EQ(invalid[0].path, "jwt.rs256_public_key_file");
  EXPECT_EQ(invalid[0].message, "rs256_public_key_pem is not a PEM public key (" + junk + ")");

  ServerConfig bad_inline;
  bad_inline.policy_path = "p.json";
  bad_inline.jwt_rs256_public_key_pem =
      "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n";
  invalid = ValidateServerConfig(bad_inline);
  ASSERT_EQ(invalid.size(), 1u);
  EXPECT_EQ(invalid[0].path, "jwt.rs256_public_key_pem");
}

TEST(ServerConfig, HostPortAndUpstreamUrls) {
  HostPort hp;
  std::string why;
  ASSERT_TRUE(ParseHostPort("127.0.0.1:80", &hp, &why));
  EXPECT_EQ(hp.host, "127.0.0.1");
  EXPECT_EQ(hp.port, 80);
  ASSERT_TRUE(ParseHostPort("[::1]:0", &hp, &why));
  EXPECT_EQ(hp.host, "::1");
  EXPECT_EQ(hp.ToString(), "[::1]:0");
  ASSERT_TRUE(ParseHostPort(":9", &hp, &why));
  EXPECT_EQ(hp.host, "0.0.0.0");
  EXPECT_FALSE(ParseHostPort("::1:80", &hp, &why));
  EXPECT_FALSE(ParseHostPort("h:70000", &hp, &why));
  EXPECT_FALSE(ParseHostPort("h:", &hp, &why));
  // Found by fuzz/targets/server_config.cc: "[[[[[[tp]:0" parsed to host
  // "[[[[[tp", whose ToString() ("[[[[[tp:0") did not parse back.
  EXPECT_FALSE(ParseHostPort("[[[[[[tp]:0", &hp, &why));
  EXPECT_EQ(why, "host must not contain spaces, control characters or brackets");
  EXPECT_FALSE(ParseHostPort("a]b:80", &hp, &why));
  EXPECT_FALSE(ParseHostPort("a b:80", &hp, &why));
  UpstreamUrl u;
  ASSERT_TRUE(ParseUpstreamUrl("http://app.local/v2/", &u, &why));
  EXPECT_EQ(u.address.host, "app.local");
  EXPECT_EQ(u.address.port, 80);
  EXPECT_EQ(u.base_path, "/v2");
  EXPECT_EQ(u.host_header, "app.local");
  ASSERT_TRUE(ParseUpstreamUrl("http://[::1]:3000", &u, &why));
  EXPECT_EQ(u.address.port, 3000);
  EXPECT_FALSE(u.tls);
  // https:// (issue 35): TLS, port 443 by default; the Host field as written.
  ASSERT_TRUE(ParseUpstreamUrl("https://api.example/v1", &u, &why));
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.address.host, "api.example");
  EXPECT_EQ(u.address.port, 443);
  EXPECT_EQ(u.host_header, "api.example");
  EXPECT_EQ(u.base_path, "/v1");
  ASSERT_TRUE(ParseUpstreamUrl("https://[::1]:8443", &u, &why));
  EXPECT_EQ(u.address.port, 8443);
  EXPECT_FALSE(ParseUpstreamUrl("ftp://x", &u, &why));
  EXPECT_EQ(why, "must start with http:// or https://");
  EXPECT_FALSE(ParseUpstreamUrl("https://", &u, &why));
  EXPECT_FALSE(ParseUpstreamUrl("http://", &u, &why));
  // Found by fuzz/targets/server_config.cc: the authority is sent as the Host
  // field and the base path in the request line of every upstream request.
  EXPECT_FALSE(ParseUpstreamUrl("http://a\r\nX-Injected: 1:80/", &u, &why));
  EXPECT_EQ(why, "must not contain spaces or control characters");
  EXPECT_FALSE(ParseUpstreamUrl(std::string_view("http://k\0\0\x09x", 12), &u, &why));
  EXPECT_FALSE(ParseUpstreamUrl("http://app/base HTTP/1.0", &u, &why));
  EXPECT_FALSE(ParseUpstreamUrl("http://app/b\x7f", &u, &why));
}

// The identity hash key file is read like the admin token file (the redactor
// itself: tests/base/identity_redactor_test.cc).
TEST(ServerConfig, IdentityHashKeyFileIsReadLikeTheAdminToken) {
  const tollgate::testing::ScopedTempDir dir;
  std::ofstream(dir.File("key"), std::ios::binary) << "fleet-wide-hash-key-0123\r\n";
  std::ofstream(dir.File("blank"), std::ios::binary) << "\nfleet-wide-hash-key-0123\n";
  ServerConfig c;
  c.policy_path = "p.json";
  EXPECT_TRUE(
      ParseServerConfig(
          R"({"identities": {"raw": true, "hash_key_file": ")" + dir.File("key") + R"("}})", &c)
          .empty());
  EXPECT_EQ(c.identity_hash_key, "fleet-wide-hash-key-0123");
  EXPECT_TRUE(c.raw_identities);
  EXPECT_TRUE(ValidateServerConfig(c).empty());
  auto errors = ParseServerConfig(
      R"({"identities": {"hash_key_file": ")" + dir.File("blank") + R"(", "bogus": 1}})", &c);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].path, "identities.hash_key_file");
  EXPECT_NE(errors[0].message.find("the first line is blank"), std::string::npos);
  EXPECT_EQ(errors[1].path, "identities.bogus");
}

TEST(Prometheus, EscapesLabelsAndWritesHistograms) {
  PrometheusWriter w;
  w.Family("x_total", "counter", "Help with \\ and\nnewline.");
  w.Sample("x_total", {"rule", "a\"b\\c\nd"}, uint64_t{3});
  std::string text = w.Take();
  EXPECT_EQ(text,
            "# HELP x_total Help with \\\\ and\\nnewline.\n# TYPE x_total counter\n"
            "x_total{rule=\"a\\\"b\\\\c\\nd\"} 3\n");
  ServerMetrics m(2);
  m.shard(0).ObserveDecision(10'000, false);         // 10 us
  m.shard(1).ObserveDecision(2'000'000, true);       // 2 ms
  m.shard(1).ObserveDecision(5'000'000'000, false);  // 5 s: only +Inf
  PrometheusWriter w2;
  m.Render(w2);
  std::string h = w2.Take();
  EXPECT_NE(h.find("tollgate_decision_duration_seconds_bucket{le=\"2.5e-05\"} 1\n"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("tollgate_decision_duration_seconds_bucket{le=\"0.0025\"} 2\n"),
            std::string::npos);
  EXPECT_NE(h.find("tollgate_decision_duration_seconds_bucket{le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(h.find("tollgate_decision_duration_seconds_bucket{le=\"+Inf\"} 3\n"),
            std::string::npos);
  EXPECT_NE(h.find("tollgate_decision_duration_seconds_count 3\n"), std::string::npos);
  EXPECT_NE(h.find("tollgate_store_errors_total 1\n"), std::string::npos);
}

TEST(TraceContext, ParsesOnlyValidTraceparents) {
  auto t = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  EXPECT_EQ(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t.parent_id, "00f067aa0ba902b7");
  for (const char* bad : {"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                          "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                          "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                          "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\n"}) {
    EXPECT_TRUE(ParseTraceparent(bad).traceparent.empty()) << bad;
  }
  // A future version may append fields.
  EXPECT_FALSE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz")
                   .trace_id.empty());
}

// Logger::Client is ClientLogText (tests/base/log_text_test.cc): it cuts first, then escapes.
TEST(LogText, LoggerClientCutsThenEscapes) {
  // Logger::Client cuts first, then escapes.
  EXPECT_EQ(Logger::Client(std::string(300, '\x9b')), EscapeLogText(std::string(256, '\x9b')));
}

TEST(RejectionGate, SamplesAndCapsPerSecond) {
  RejectionGate gate(10, 3);
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) admitted += gate.Admit(/*now_s=*/5);
  EXPECT_EQ(admitted, 3);  // 100 sampled, 3 allowed in second 5
  admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += gate.Admit(6);
  EXPECT_EQ(admitted, 2);  // sampled 1 in 10, cap not reached
  EXPECT_EQ(gate.suppressed(), 1000u + 20u - 5u);
  RejectionGate off(0, 10);
  EXPECT_FALSE(off.Admit(1));
}

}  // namespace
}  // namespace tollgate::server
