#include "tollgate/runtime_config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tollgate/config_sections.h"
#include "tollgate/json_fields.h"

namespace tollgate {
namespace {

using json = nlohmann::json;
using Millis = std::chrono::milliseconds;

constexpr int64_t kHour = 3600 * 1000;

// The enumerated settings are parsed here, once, with each enum's own parser
// (its names are declared beside the enum). ForwardedHeader's names, which
// only the config file spells, are declared here.
constexpr std::pair<std::string_view, ForwardedHeader> kForwardedHeaderNames[] = {
    {"x-forwarded-for", ForwardedHeader::kXForwardedFor},
    {"forwarded", ForwardedHeader::kForwarded}};

bool ParseForwardedHeader(std::string_view name, ForwardedHeader* out) {
  for (const auto& [text, value] : kForwardedHeaderNames) {
    if (text == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

// A failure mode as the config spells it: exactly open, closed or degrade
// (ParseFailureMode's older aliases are the policy's, not the config's).
bool ParseConfigFailureMode(std::string_view name, FailureMode* out) {
  FailureMode mode;
  if (!ParseFailureMode(name, &mode) || FailureModeName(mode) != name) return false;
  *out = mode;
  return true;
}

constexpr std::string_view kFailureModes = "must be open, closed or degrade";

// Header styles: "draft11,x-ratelimit" or ["draft11", "x-ratelimit"], parsed
// by ParseHeaderStyles as one comma-separated list.
void ReadStyleList(JsonFields& f, std::string_view key, std::vector<HeaderStyle>* out) {
  const json* v = f.Find(key);
  if (v == nullptr) return;
  std::string joined;
  if (v->is_string()) {
    joined = v->get<std::string>();
  } else if (!v->is_array() || v->empty()) {
    return f.Error(key, "must be a style or a non-empty array of styles");
  } else {
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) return f.Error(IndexPath(key, i), "must be a string");
      joined += (i ? "," : "") + (*v)[i].get<std::string>();
    }
  }
  std::string why;
  if (!ParseHeaderStyles(joined, out, &why)) f.Error(key, why);
}

// grpc.default_algorithm: the message names the value and the algorithms.
void ReadDefaultAlgorithm(JsonFields& g, RuntimeConfig* c) {
  const std::optional<std::string> name = g.String("default_algorithm");
  if (name && !ParseAlgorithm(*name, &c->rls_default_algorithm)) {
    g.Error("default_algorithm", "unknown algorithm \"" + *name +
                                     "\" (token_bucket, leaky_bucket, fixed_window, "
                                     "sliding_window, sliding_log)");
  }
}

void ReadBreaker(JsonFields& b, RuntimeConfig* c) {
  b.Integer("consecutive_failures", &c->breaker_consecutive_failures, 1, 1000000);
  b.Double("failure_ratio", &c->breaker_failure_ratio, 0.0, 2.0);
  if (c->breaker_failure_ratio <= 0) b.Error("failure_ratio", "must be > 0");
  b.Integer("min_calls", &c->breaker_min_calls, 1, 1000000);
  b.Duration("window_ms", &c->breaker_window, 1, 3600000);
  b.Duration("open_ms", &c->breaker_open, 1, 600000);
  b.Integer("half_open_probes", &c->breaker_half_open_probes, 1, 65535);
}

void ReadStoreSection(JsonFields& s, RuntimeConfig* c) {
  s.String("url", &c->store);
  ReadEnum(s, "failure_mode", &c->failure_mode, ParseConfigFailureMode, kFailureModes);
  s.Double("degrade_fraction", &c->degrade_fraction, 0.0, 1.0);
  s.Integer("local_max_keys", &c->local_max_keys, 1, int64_t{1} << 32);
  ReadEnum(s, "local_overflow", &c->local_overflow, ParseOverflowPolicy,
           "must be evict, allow or reject");
  s.Integer("local_max_keys_per_rule", &c->local_max_keys_per_rule, 0, int64_t{1} << 32);
  s.String("local_state_file", &c->local_state_file);
  s.Duration("state_save_interval_ms", &c->state_save_interval, 0, 86400000);
  s.Duration("state_lock_wait_ms", &c->state_lock_wait, 0, 3600000);
  s.Duration("timeout_ms", &c->store_timeout, 1, 60000);
  s.Bool("charge_back", &c->charge_back);
  s.Duration("call_deadline_ms", &c->call_deadline, 0, 60000);
  s.Bool("share_rollback", &c->share_rollback);
  s.Duration("rollback_sync_ms", &c->rollback_sync, 10, 3600000);
  ReadSection(s, "breaker", [c](JsonFields& b) { ReadBreaker(b, c); });
}

// The RS256 public key file: at most 64 KiB, read now (the name is kept for
// error paths). Empty string with `why` set when it cannot be read.
std::string ReadPublicKeyFile(const std::string& key_file, std::string* why) {
  errno = 0;
  std::ifstream in(key_file, std::ios::binary);
  const int open_errno = errno;
  std::ostringstream pem;
  if (in) pem << in.rdbuf();
  if (!in || pem.str().empty() || pem.str().size() > (64u << 10)) {
    *why = !in                 ? std::strerror(open_errno)
           : pem.str().empty() ? "empty or not a file"
                               : "larger than 64 KiB";
    return "";
  }
  return pem.str();
}

void ReadJwt(JsonFields& j, RuntimeConfig* c) {
  j.String("hs256_secret", &c->jwt_hs256_secret);
  std::string inline_pem;
  std::string key_file;
  j.String("rs256_public_key_pem", &inline_pem);
  j.String("rs256_public_key_file", &key_file);
  if (!inline_pem.empty()) {
    c->jwt_rs256_public_key_pem = inline_pem;
    c->jwt_rs256_public_key_file.clear();
  }
  if (!key_file.empty()) {
    if (!inline_pem.empty()) {
      j.Error("rs256_public_key_file",
              "set rs256_public_key_file or rs256_public_key_pem, not both");
    } else {
      std::string why;
      std::string pem = ReadPublicKeyFile(key_file, &why);
      if (pem.empty()) {
        j.Error("rs256_public_key_file", "cannot read " + key_file + ": " + why);
      } else {
        c->jwt_rs256_public_key_pem = std::move(pem);
        c->jwt_rs256_public_key_file = key_file;
      }
    }
  }
  j.String("issuer", &c->jwt_issuer);
  j.String("audience", &c->jwt_audience);
  j.Integer("leeway_s", &c->jwt_leeway_s, 0, 3600);
  j.Bool("verified_upstream", &c->jwt_verified_upstream);
}

// Reconnect attempts back off to at most this, so decisions return to Redis
// within ~1 s of its recovery (breaker cool-down + one reconnect + a probe).
constexpr std::chrono::milliseconds kReconnectBackoffMax{200};

}  // namespace

namespace runtime_config {

void ReadPolicySource(JsonFields& r, RuntimeConfig* c) {
  r.String("policy", &c->policy_path);
  r.Duration("policy_poll_interval_ms", &c->policy_poll_interval, 0, kHour);
  r.String("policy_value_dir", &c->policy_value_dir);
  r.Bool("policy_remote_files", &c->policy_remote_files);
  ReadSection(r, "etcd", [c](JsonFields& e) {
    e.String("username", &c->etcd.username);
    e.String("password_file", &c->etcd.password_file);
    e.Duration("timeout_ms", &c->etcd.timeout, 1, 60000);
    ReadSection(e, "tls", [c](JsonFields& t) {
      t.String("ca_file", &c->etcd.tls.ca_file);
      t.String("cert_file", &c->etcd.tls.cert_file);
      t.String("key_file", &c->etcd.tls.key_file);
      t.String("server_name", &c->etcd.tls.server_name);
    });
  });
}

void ReadEnvoy(JsonFields& g, RuntimeConfig* c) {
  g.StringList("rls_config", &c->rls_config);
  ReadStyleList(g, "headers", &c->grpc_header_styles);
  g.Bool("retry_after", &c->grpc_retry_after);
  g.Double("retry_after_jitter", &c->grpc_retry_after_jitter, 0.0, 10.0);
  g.Bool("response_metadata", &c->grpc_response_metadata);
  ReadDefaultAlgorithm(g, c);
}

void ReadStore(JsonFields& r, RuntimeConfig* c) {
  ReadStringOrSection(r, "store", &c->store, "must be a URL string or an object",
                      [c](JsonFields& s) { ReadStoreSection(s, c); });
  ReadEnum(r, "failure_mode", &c->failure_mode, ParseConfigFailureMode, kFailureModes);
}

void ReadDecisions(JsonFields& r, RuntimeConfig* c) {
  ReadStyleList(r, "headers", &c->header_styles);
  r.Double("retry_after_jitter", &c->retry_after_jitter, 0.0, 10.0);
  r.StringList("trusted_proxies", &c->trusted_proxies);
  ReadEnum(r, "forwarded_header", &c->forwarded_header, ParseForwardedHeader,
           "must be x-forwarded-for or forwarded");
  ReadSection(r, "jwt", [c](JsonFields& j) { ReadJwt(j, c); });
}

void CheckPolicySource(const RuntimeConfig& c, std::vector<ConfigError>* errors) {
  if (c.policy_path.empty()) errors->push_back({"policy", "is required (--policy FILE)"});
  if (c.policy_remote_files && c.policy_value_dir.empty() &&
      c.policy_path.find("://") != std::string::npos) {
    errors->push_back({"policy_value_dir",
                       "is required when an etcd policy may read value files "
                       "(policy_remote_files)"});
  }
}

void CheckEnvoy(const RuntimeConfig& c, std::vector<ConfigError>* errors) {
  if (!(c.grpc_retry_after_jitter >= 0 && c.grpc_retry_after_jitter <= 10)) {
    errors->push_back({"grpc.retry_after_jitter", "must be between 0 and 10"});
  }
}

void CheckStore(const RuntimeConfig& c, std::vector<ConfigError>* errors) {
  if (auto spec = StoreSpecOf(c); !spec.ok()) {
    errors->push_back({"store", spec.status().message()});
  } else if (Status store = CheckStoreSpec(*spec); !store.ok()) {
    // The runtime's one store grammar; its "store: " is this error's path already.
    std::string_view why = store.message();
    if (why.starts_with("store: ")) why.remove_prefix(7);
    errors->push_back({"store", std::string(why)});
  }
}

void CheckJwt(const RuntimeConfig& c, std::vector<ConfigError>* errors) {
  if (c.jwt_rs256_public_key_pem.empty()) return;
  JwtOptions jwt;
  jwt.rs256_public_key_pem = c.jwt_rs256_public_key_pem;
  if (Status v = ValidateJwtOptions(jwt); !v.ok()) {
    std::string message(v.message());
    if (message.starts_with("jwt: ")) message.erase(0, 5);
    if (!c.jwt_rs256_public_key_file.empty()) message += " (" + c.jwt_rs256_public_key_file + ")";
    errors->push_back({c.jwt_rs256_public_key_file.empty() ? "jwt.rs256_public_key_pem"
                                                           : "jwt.rs256_public_key_file",
                       message});
  }
}

}  // namespace runtime_config

std::vector<ConfigError> ParseRuntimeConfig(std::string_view json_text, RuntimeConfig* c) {
  std::vector<ConfigError> errors;
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (doc.is_discarded()) {
    errors.push_back({"", "not valid JSON"});
    return errors;
  }
  if (!doc.is_object()) {
    errors.push_back({"", "must be a JSON object"});
    return errors;
  }
  ConfigErrors collector(&errors);
  JsonFields r(doc, "", collector, JsonFields::Messages::kShort);
  runtime_config::ReadPolicySource(r, c);
  r.StringList("rls_config", &c->rls_config);
  if (const json* grpc = r.Find("grpc")) {
    if (grpc->is_object()) {
      // Its listen and tls are the front end's: not flagged as unknown here.
      JsonFields g = r.Nested(*grpc, "grpc");
      runtime_config::ReadEnvoy(g, c);
    } else {
      r.Error("grpc", "must be an object");
    }
  }
  runtime_config::ReadStore(r, c);
  runtime_config::ReadDecisions(r, c);
  return errors;
}

std::vector<ConfigError> LoadRuntimeConfigFile(const std::string& path, RuntimeConfig* config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {{"", "cannot open config file " + path}};
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (4u << 20)) return {{"", "config file larger than 4 MiB"}};
  return ParseRuntimeConfig(text.str(), config);
}

std::vector<ConfigError> ValidateRuntimeConfig(const RuntimeConfig& c) {
  std::vector<ConfigError> errors;
  runtime_config::CheckPolicySource(c, &errors);
  runtime_config::CheckEnvoy(c, &errors);
  runtime_config::CheckStore(c, &errors);
  runtime_config::CheckJwt(c, &errors);
  return errors;
}

Result<StoreSpec> StoreSpecOf(const RuntimeConfig& config) {
  StoreSpec spec;
  spec.url = config.store;
  spec.local.max_keys = config.local_max_keys;
  spec.local.max_keys_per_group = config.local_max_keys_per_rule;
  spec.local.overflow = config.local_overflow;
  spec.call_timeout = config.store_timeout;
  spec.reconnect_backoff_max = kReconnectBackoffMax;
  ResilienceSpec r;
  r.mode = config.failure_mode;
  r.degrade_fraction = config.degrade_fraction;
  r.charge_back = config.charge_back;
  r.call_deadline = config.call_deadline;
  r.breaker.consecutive_failures = config.breaker_consecutive_failures;
  r.breaker.failure_ratio = config.breaker_failure_ratio;
  r.breaker.min_calls = config.breaker_min_calls;
  r.breaker.window = config.breaker_window;
  r.breaker.open_duration = config.breaker_open;
  r.breaker.half_open_probes = config.breaker_half_open_probes;
  spec.resilience = r;
  return spec;
}

Result<LocalStoreOptions> LocalStoreOptionsOf(const RuntimeConfig& c) {
  auto spec = StoreSpecOf(c);
  if (!spec.ok()) return spec.status();
  if (auto scheme = StoreSchemeOf(c.store); !scheme.ok() || *scheme != StoreScheme::kLocal) {
    return spec->local;
  }
  return LocalOptionsOf(*spec);
}

EnforcerOptions MakeEnforcerOptions(const RuntimeConfig& c) {
  EnforcerOptions o;
  o.header_styles = c.header_styles;
  o.retry_after_jitter = c.retry_after_jitter;
  o.trusted_proxies = c.trusted_proxies;
  o.forwarded_header = c.forwarded_header;
  o.jwt.hs256_secret = c.jwt_hs256_secret;
  o.jwt.rs256_public_key_pem = c.jwt_rs256_public_key_pem;
  o.jwt.verified_upstream = c.jwt_verified_upstream;
  o.jwt.issuer = c.jwt_issuer;
  o.jwt.audience = c.jwt_audience;
  o.jwt.leeway = std::chrono::seconds(c.jwt_leeway_s);
  // The gateway releases when the upstream response ends, /v1/decide answers
  // carry lease tokens for /v1/release; /v1/auth and RLS callers rely on
  // lease expiry (docs/configuration.md, "Concurrency rules").
  o.releases_leases = true;
  return o;
}

Result<RuntimeOptions> RuntimeOptionsOf(const RuntimeConfig& c) {
  RuntimeOptions options;
  options.policy.location = c.policy_path;
  options.policy.value_dir = c.policy_value_dir;
  options.policy.remote_files = c.policy_remote_files;
  options.policy.etcd = c.etcd;
  auto spec = StoreSpecOf(c);
  if (!spec.ok()) return spec.status();
  options.store = std::move(spec).value();
  options.enforcer = MakeEnforcerOptions(c);
  options.fleet.share_rollback = c.share_rollback;
  options.fleet.rollback_sync = c.rollback_sync;
  options.local_state.file = c.local_state_file;
  options.local_state.save_interval = c.state_save_interval;
  options.local_state.lock_wait = c.state_lock_wait;
  return options;
}

}  // namespace tollgate
