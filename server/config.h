// ServerConfig: everything tollgated needs to start, from a JSON file and flags:
// the engine's part (RuntimeConfig, tollgate/runtime_config.h: the policy
// source, the store, decisions, JWT, the Envoy rules) and tollgated's own
// (listeners, TLS, admin, HTTP limits, the gateway, logs, identities, top,
// tracing).
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
#include "tollgate/runtime_config.h"
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

// "http://host[:port][/base]" or "https://host[:port][/base]" for gateway
// mode (port 80 and 443 by default).
struct UpstreamUrl {
  HostPort address;
  bool tls = false;         // https://: TLS to the upstream (ServerConfig::upstream_tls)
  std::string host_header;  // the Host header sent upstream: "host:port"
  std::string base_path;    // prefix added before the request path, "" or "/base"
};
bool ParseUpstreamUrl(std::string_view text, UpstreamUrl* out, std::string* error);

struct ServerConfig : RuntimeConfig {
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
  // Envoy rate limit service (gRPC): "" = off; its rules (rls_config) are the engine's.
  std::string grpc_listen;

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
  // An https:// upstream (`gateway.upstream_tls`, server/upstream_tls.h): the
  // CAs its certificate must chain to ("" = the system's trust store), the
  // name verified and sent as SNI ("" = the upstream's host), an optional
  // client certificate. Verification is on unless upstream_tls_verify is false.
  TlsClientSettings upstream_tls;
  bool upstream_tls_verify = true;
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

  // HAProxy's SPOE agent (`spoe`, server/spoe_session.h, docs/haproxy.md): SPOP
  // on its own listener, decided on the one Enforcer like /v1/auth. "" = off.
  std::string spoe_listen;
  // Who may connect (SPOP has no authentication): CIDRs; loopback by default.
  std::vector<std::string> spoe_allowed_peers = {"127.0.0.0/8", "::1/128"};
  size_t spoe_max_connections = 256;     // more are closed at accept
  uint32_t spoe_max_frame_size = 16380;  // the most we accept (HAProxy's default bufsize - 4)
  size_t spoe_max_in_flight = 64;        // NOTIFY frames decided at once per connection
  Millis spoe_hello_timeout{5000};   // connect to HAPROXY-HELLO, and first to last byte of a frame
  Millis spoe_idle_timeout{120000};  // no frame and nothing in flight: closed
  Millis spoe_write_timeout{5000};   // one write of ACK frames
  std::string spoe_message = "tollgate";  // the spoe-message decided; others are acknowledged empty
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

// Bytes the session's read buffer may hold: a request head, a chunk-size line
// with its extensions or a trailer section that does not fit is refused.
size_t ReadBufferLimit(const ServerConfig& config);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_CONFIG_H_
