// ServerConfig: everything tollgated needs to start, from a JSON file and flags.
//
// LoadServerConfigFile() / ParseServerConfig() read the JSON document described
// in docs/operations.md ("Config file reference"); every problem is returned
// with its JSON path ("gateway.upstream: must start with http://"), never just
// the first, and unknown fields are errors (a typo must not pass silently).
// Command-line flags are applied on top by the caller (server/main.cc, through
// the same parser), then ValidateServerConfig() checks the merged result once
// more. Every enumerated setting is parsed once, here, into its library's own
// enum (FailureMode, OverflowPolicy, HeaderStyle, ForwardedHeader, LogLevel,
// Algorithm), whose names are declared once beside it; nothing re-reads text.
//
// Thread safety: plain value type. Errors: ConfigError lists; no exceptions
// escape these functions.
#ifndef TOLLGATE_SERVER_CONFIG_H_
#define TOLLGATE_SERVER_CONFIG_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/log_level.h"
#include "server/secrets.h"
#include "tollgate/failure_mode.h"
#include "tollgate/limit.h"
#include "tollgate/policy.h"
#include "tollgate/runtime.h"
#include "tollgate/store_spec.h"
#include "tollgate/tls.h"

namespace tollgate::server {

using Millis = std::chrono::milliseconds;

struct HostPort {
  std::string host;  // numeric IPv4/IPv6 address or a name resolved at startup
  uint16_t port = 0;
  std::string ToString() const;
};
// "127.0.0.1:8080", "[::1]:8080", ":8080" (all interfaces), "localhost:0".
bool ParseHostPort(std::string_view text, HostPort* out, std::string* error);

// "http://host:port[/base]" for gateway mode (https is not supported).
struct UpstreamUrl {
  HostPort address;
  std::string host_header;  // the Host header sent upstream: "host:port"
  std::string base_path;    // prefix added before the request path, "" or "/base"
};
bool ParseUpstreamUrl(std::string_view text, UpstreamUrl* out, std::string* error);

struct ServerConfig {
  // What to enforce.
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
  // How an etcd policy connects (`etcd`: username, password_file, tls, timeout_ms).
  EtcdClientOptions etcd;

  // Listeners.
  std::string listen = "127.0.0.1:8080";
  std::string admin_listen = "127.0.0.1:9090";  // "" = no admin listener
  // SO_REUSEPORT on the main, admin and gRPC listeners: a new tollgated
  // listens beside this one during a restart. Off by default: a second
  // tollgated started by mistake then fails ("address in use") instead of
  // silently taking a share of the connections.
  bool reuse_port = false;
  // TLS on the main listener (`tls`), the admin listener (`admin.tls`) and the
  // gRPC port (`grpc.tls`); off (plain) without a cert_file (tollgate/tls.h).
  TlsServerSettings tls;
  TlsServerSettings admin_tls;
  TlsServerSettings grpc_tls;
  // Bearer token for the admin listener (and /metrics); "" = none. Required when
  // admin_listen is not loopback unless admin_allow_unauthenticated (docs/operations.md).
  std::string admin_token;
  std::string admin_token_file;  // where admin_token was read from (for messages)
  bool admin_allow_unauthenticated = false;
  // Named, scoped admin tokens (admin.tokens), beside admin_token; secrets read
  // from their files when the config is parsed, and again on every reload.
  std::vector<AdminToken> admin_tokens;
  // Host names the admin listener answers besides IP literals, "localhost" and
  // its own listen host (server/admin_guard.h: DNS rebinding); lower case.
  std::vector<std::string> admin_allowed_hosts;
  // What the main listener serves besides the gateway and /healthz, /readyz
  // (server/route.h): unset = on without a gateway (a decision service), off
  // in gateway mode (the public side of the protected upstream).
  std::optional<bool> decision_on_main;  // POST /v1/decide, GET /v1/auth
  std::optional<bool> metrics_on_main;   // GET /metrics
  size_t admin_max_connections = 64;     // admin listener's own cap (separate from main's)
  int threads = 0;                       // 0 = one per core
  // Envoy rate limit service (gRPC): "" = off; rls_config = envoyproxy/ratelimit YAML files.
  std::string grpc_listen;
  std::vector<std::string> rls_config;
  // RateLimit headers in ShouldRateLimit's response_headers_to_add (a list as
  // `header_styles`); none (the default, empty) leaves headers to Envoy.
  std::vector<HeaderStyle> grpc_header_styles;
  bool grpc_retry_after = true;          // Retry-After on OVER_LIMIT (response_headers_to_add)
  double grpc_retry_after_jitter = 0.5;  // as retry_after_jitter, for that Retry-After
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

  // HTTP limits and timeouts (per connection).
  size_t max_header_bytes = 16 * 1024;      // request line + headers; over -> 431
  size_t max_body_bytes = 64 * 1024;        // decision API bodies; over -> 413
  size_t max_chunk_extension_bytes = 4096;  // all chunk extensions of one body; over -> 400
  size_t max_trailer_bytes = 8192;          // last-chunk line + trailer fields; over -> 431
  size_t max_connections = 10000;           // main listener; more are closed at accept
  size_t max_connections_per_ip = 256;      // per listener and client address
  Millis read_timeout{10000};               // from the first byte to the full request
  Millis body_timeout{60000};               // a streamed (gateway) request body, first to last byte
  Millis lingering_close{2000};  // after an error answer: drain the unread request this long
  Millis idle_timeout{60000};    // keep-alive wait for the next request
  Millis write_timeout{10000};   // to write one response
  Millis drain_timeout{10000};   // SIGTERM: wait this long for in-flight requests

  // Gateway mode: every path that is not a tollgated endpoint is decided and proxied.
  std::string upstream;  // "" = gateway mode off
  Millis upstream_connect_timeout{2000};
  Millis upstream_timeout{30000};  // for the upstream's response header and each body read
  size_t upstream_max_idle = 64;   // idle keep-alive upstream connections per thread
  size_t gateway_max_body_bytes = 16 * 1024 * 1024;  // streamed request bodies; over -> 413
  // A client gone mid-response: the upstream is read on (discarded) this long
  // and this many body bytes for its trailer, else the rules' abort_cost.
  Millis abort_drain_timeout{30000};
  uint64_t abort_drain_bytes = 8 * 1024 * 1024;

  // Logs.
  LogLevel log_level = LogLevel::kInfo;
  std::string log_file;                  // "" = stderr
  uint32_t reject_log_sample = 100;      // log 1 in N rejections...
  uint32_t reject_logs_per_second = 10;  // ...and at most this many a second
  // Shadow rules' would-be rejections ("shadow_rejected"): 1 in N, at most M a second.
  uint32_t shadow_log_sample = 1;
  uint32_t shadow_logs_per_second = 10;
  bool access_log = false;  // one line per request (debugging; costs throughput)

  // Tracing: OpenTelemetry spans per decision, OTLP/HTTP JSON (server/tracing.h).
  std::string trace_endpoint;        // http://host:4318/v1/traces; "" = off
  double trace_sample_ratio = 0.01;  // new traces kept
  bool trace_parent_based = true;    // a traceparent's sampled flag decides
  std::string trace_service_name = "tollgated";
  size_t trace_max_queue = 2048;      // spans waiting; more are dropped and counted
  size_t trace_max_batch = 512;       // spans per export request
  Millis trace_flush_interval{1000};  // send at least this often
  Millis trace_timeout{2000};         // one export request, connect to response

  // Identities (keys, addresses) in /v1/top, /v1/explain and logs: hashed with
  // HMAC-SHA256 under this key (random per process when ""), or shown raw.
  bool raw_identities = false;
  std::string identity_hash_key;
  std::string identity_hash_key_file;  // where identity_hash_key was read from

  // GET /v1/top.
  Millis top_window{60000};
  size_t top_capacity = 64;  // identities tracked per rule (space-saving sketch)
};

// Parses a config document over the defaults above. Returns every error.
std::vector<ConfigError> ParseServerConfig(std::string_view json_text, ServerConfig* config);
std::vector<ConfigError> LoadServerConfigFile(const std::string& path, ServerConfig* config);
// Reads the admin token from `path` (the one strict reader for the flag and the
// config file: exactly one non-empty line, see server/secrets.h) into
// config->admin_token and admin_token_file. False with "<path>: <why>".
bool ReadAdminTokenFile(const std::string& path, ServerConfig* config, std::string* error);
// Every admin token the config gives: the legacy one (admin.token,
// admin.token_file, --admin-token-file) as "admin" with scope write, then
// admin.tokens in order.
std::vector<AdminToken> AdminTokensOf(const ServerConfig& config);
// Checks the merged config (after flags): ranges, listeners, store URL.
std::vector<ConfigError> ValidateServerConfig(const ServerConfig& config);

// The local store's options: the config's local_* fields, then the query of a
// "local://?..." store URL (which wins), as the runtime's factory applies them.
Result<LocalStoreOptions> LocalStoreOptionsOf(const ServerConfig& c);

// Bytes the session's read buffer may hold: a request head, a chunk-size line
// with its extensions or a trailer section that does not fit is refused.
size_t ReadBufferLimit(const ServerConfig& config);

// Turns the config's decision options into EnforcerOptions (validated already).
EnforcerOptions MakeEnforcerOptions(const ServerConfig& config);

// The runtime store spec of the config's `store` section (URL, local_*,
// timeouts, failure mode, breaker). Remote stores are always resilient and
// register in the fleet. kInvalidArgument names the field that is wrong.
Result<StoreSpec> StoreSpecOf(const ServerConfig& config);

// The engine's options (tollgate/runtime.h): the policy source, the store
// spec, the Enforcer's options and the fleet's. Fails as StoreSpecOf does.
Result<RuntimeOptions> RuntimeOptionsOf(const ServerConfig& config);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_CONFIG_H_
