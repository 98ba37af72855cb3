// RuntimeConfig: the engine's part of tollgated's JSON config file (the policy
// source, the store and its resilience, how decisions are rendered and whom
// they trust, JWT, the Envoy rule files), and its mapping onto the Runtime's
// typed options (tollgate/runtime.h). An embedder loads tollgated's config
// file with it and gets the engine tollgated would run:
//
//   RuntimeConfig config;
//   auto errors = LoadRuntimeConfigFile("/etc/tollgate/tollgated.json", &config);
//   if (errors.empty()) errors = ValidateRuntimeConfig(config);
//   auto options = RuntimeOptionsOf(config);          // Result<RuntimeOptions>
//   auto runtime = Runtime::Create(std::move(options).value());
//
// ParseRuntimeConfig reads only the engine's keys and ignores the others
// (listeners, TLS, HTTP limits, logs, tracing: tollgated's own, checked by
// `tollgated --check`). tollgated's parser (server/config.cc) reads the same
// document in one pass: it calls the section readers below where their keys
// come in the file (docs/operations.md, "Config file reference"), so unknown
// keys are errors there and every error keeps its place and path
// (`store.breaker.open_ms: must be at least 1`, `jwt.rs256_public_key_file:
// cannot read ...`). Errors are never only the first, and no exception
// escapes; an RS256 public key file is read while parsing (64 KiB at most).
//
// Thread safety: RuntimeConfig is a plain value; the functions are reentrant.
// Implemented in tollgate_runtime (src/runtime/runtime_config.cc).
#ifndef TOLLGATE_RUNTIME_CONFIG_H_
#define TOLLGATE_RUNTIME_CONFIG_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/config_error.h"
#include "tollgate/failure_mode.h"
#include "tollgate/limit.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"
#include "tollgate/runtime.h"
#include "tollgate/status.h"
#include "tollgate/store_spec.h"

namespace tollgate {

class JsonFields;

struct RuntimeConfig {
  using Millis = std::chrono::milliseconds;

  // The policy source: a file, or an etcd key (etcd://...).
  std::string policy_path;
  Millis policy_poll_interval{1000};  // mtime check for automatic reload; 0 = off
  // The directory a policy's value files and tenant tables are read from,
  // confined to it (docs/configuration.md, "Value files"); "" = the policy
  // file's directory (an etcd policy: none, no files).
  std::string policy_value_dir;
  // Whether a policy that arrives over the network (PUT /v1/policy, an etcd
  // key) may read value files from that directory; false: such a policy
  // naming a file is refused.
  bool policy_remote_files = false;
  // How an etcd policy connects (`etcd`: username, password_file, timeout_ms,
  // tls; docs/operations.md, "etcd in production").
  EtcdClientOptions etcd;

  // The Envoy rate limit service's rules: envoyproxy/ratelimit YAML files.
  std::vector<std::string> rls_config;
  // RateLimit headers in ShouldRateLimit's response_headers_to_add (a list as
  // `header_styles`); none (the default, empty) leaves headers to Envoy.
  std::vector<HeaderStyle> grpc_header_styles;
  bool grpc_retry_after = true;          // Retry-After on OVER_LIMIT (response_headers_to_add)
  double grpc_retry_after_jitter = 0.5;  // as retry_after_jitter, for that Retry-After
  bool grpc_response_metadata = false;   // dynamic_metadata in responses (RlsDecideOptions)
  // Algorithm for YAML rate_limit blocks without `algorithm`.
  Algorithm rls_default_algorithm = Algorithm::kTokenBucket;

  // Where state lives.
  std::string store = "local";  // local | redis://HOST:PORT | redis-cluster://HOST:PORT[,...]
  FailureMode failure_mode = FailureMode::kOpen;
  double degrade_fraction = 0.5;  // degrade: local buckets at this share of the limit
  size_t local_max_keys = size_t{1} << 20;
  // Local store at its key cap (docs/architecture.md).
  OverflowPolicy local_overflow = OverflowPolicy::kEvict;
  size_t local_max_keys_per_rule = 0;  // 0: no per-rule cap
  // The local store's state across restarts (docs/operations.md, "Restarts
  // and state"): "" = off; ignored with a remote store.
  std::string local_state_file;
  Millis state_save_interval{30000};  // 0: saved on drain only
  // How long a start waits for the process that holds the state file's lock
  // (the one being replaced) to save and exit.
  Millis state_lock_wait{60000};
  Millis store_timeout{100};  // per store call (Redis), enqueue to reply
  bool charge_back = true;    // degrade: charge local grants back to Redis on recovery
  Millis call_deadline{0};    // resilient store guard on synchronous calls; 0 = off
  // Remote stores: share the rollback guards' trips and clears with every
  // instance on the same Redis (tollgate/rollback_fleet.h), reading the
  // fleet's hash every rollback_sync.
  bool share_rollback = true;
  Millis rollback_sync{1000};
  // Circuit breaker in front of the remote store (CircuitBreakerOptions).
  int breaker_consecutive_failures = 5;
  double breaker_failure_ratio = 0.5;  // > 1 disables the ratio rule
  int breaker_min_calls = 20;
  Millis breaker_window{10000};
  Millis breaker_open{250};
  int breaker_half_open_probes = 1;

  // How decisions are rendered and who may tell us the client address.
  // Styles, each sent once; the config takes "draft11,draft03,x-ratelimit"
  // (ParseHeaderStyles) or an array. Empty: none.
  std::vector<HeaderStyle> header_styles = {HeaderStyle::kDraft11};
  double retry_after_jitter = 0.5;
  std::vector<std::string> trusted_proxies;
  ForwardedHeader forwarded_header = ForwardedHeader::kXForwardedFor;
  std::string jwt_hs256_secret;
  // RS256: the PEM public key, inline or read from jwt.rs256_public_key_file at
  // parse time (the file name is kept for error paths).
  std::string jwt_rs256_public_key_pem;
  std::string jwt_rs256_public_key_file;
  bool jwt_verified_upstream = false;
  std::string jwt_issuer;     // "" = iss not checked
  std::string jwt_audience;   // "" = aud not checked
  int64_t jwt_leeway_s = 30;  // clock skew allowed for exp / nbf
};

// The engine's keys of a config document, over the defaults above; the other
// keys are left to their front end. Returns every error.
std::vector<ConfigError> ParseRuntimeConfig(std::string_view json_text, RuntimeConfig* config);
// The same from a file (at most 4 MiB).
std::vector<ConfigError> LoadRuntimeConfigFile(const std::string& path, RuntimeConfig* config);
// Checks what the readers cannot see alone: a policy named, the Envoy
// Retry-After jitter, the store spec, the JWT key (the checks below, in this order).
std::vector<ConfigError> ValidateRuntimeConfig(const RuntimeConfig& config);

// The runtime store spec of the `store` section (URL, local_*, timeouts,
// failure mode, breaker). Remote stores are always resilient and register in
// the fleet. kInvalidArgument names the field that is wrong.
Result<StoreSpec> StoreSpecOf(const RuntimeConfig& config);
// The local store's options: the local_* fields, then the query of a
// "local://?..." store URL (which wins), as the runtime's factory applies them.
Result<LocalStoreOptions> LocalStoreOptionsOf(const RuntimeConfig& config);
// The decision options (validated already) as EnforcerOptions.
EnforcerOptions MakeEnforcerOptions(const RuntimeConfig& config);
// The engine's options: the policy source, the store spec, the Enforcer's
// options, the fleet's and the local state's. Fails as StoreSpecOf does. The
// Envoy front end's options (RuntimeOptions::envoy) are its front end's to set.
Result<RuntimeOptions> RuntimeOptionsOf(const RuntimeConfig& config);

// The section readers, for a front end whose parser reads the same document
// (tollgated: server/config.cc). Each reads its keys from `fields`.
namespace runtime_config {
// Top level: policy, policy_poll_interval_ms, policy_value_dir, policy_remote_files,
// etcd (its files are checked by Runtime::CheckPolicySource, read when the source opens).
void ReadPolicySource(JsonFields& root, RuntimeConfig* config);
// The `grpc` section's engine keys: rls_config, headers, retry_after,
// retry_after_jitter, default_algorithm (its listen and tls are the front end's).
void ReadEnvoy(JsonFields& grpc, RuntimeConfig* config);
// Top level: store (a URL string or an object with breaker), then failure_mode.
void ReadStore(JsonFields& root, RuntimeConfig* config);
// Top level: headers, retry_after_jitter, trusted_proxies, forwarded_header, jwt.
void ReadDecisions(JsonFields& root, RuntimeConfig* config);

// ValidateRuntimeConfig's checks, one concern each, for a front end that
// interleaves them with its own (tollgated reports errors in its file's order).
void CheckPolicySource(const RuntimeConfig& config, std::vector<ConfigError>* errors);
void CheckEnvoy(const RuntimeConfig& config, std::vector<ConfigError>* errors);
void CheckStore(const RuntimeConfig& config, std::vector<ConfigError>* errors);
void CheckJwt(const RuntimeConfig& config, std::vector<ConfigError>* errors);
}  // namespace runtime_config

}  // namespace tollgate

#endif  // TOLLGATE_RUNTIME_CONFIG_H_
