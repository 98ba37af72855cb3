// The Envoy rate limit service over gRPC:
// /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, served by
// gRPC's callback API (no thread per call; with an asynchronous store a
// call holds no thread while the store decides). Transport only: every
// decision is the engine's (tollgate/envoy_rls.h, an EnvoyDecider).
//
// tollgated serves the decider of its Runtime (RlsServerOptions::decider, from
// AttachEnvoyDecider: the configuration reloads with the policy, in the
// Runtime's one swap):
//
//   auto server = StartRlsServer({.address = "0.0.0.0:8081", .decider = &decider});
//
// Standalone (tests, benchmarks), on the caller's Enforcer (typically over an
// empty policy) and a configuration compiled by src/rls/rls_yaml.h
// (MakeEnvoyDecider; it creates no Enforcer):
//
//   auto server = StartRlsServer({.address = "127.0.0.1:8081", .enforcer = &enforcer,
//                                 .config = parsed.config});
//   ... server->SetConfig(new_config);        // atomic swap, e.g. on SIGHUP
//   ... server->counters().AppendPrometheus(&text);
//   server->Shutdown();                        // also done by the destructor
//
// With RlsServerOptions::rlqs the same listener serves Envoy's Rate Limit
// Quota Service (rlqs_service.h). It also serves grpc.health.v1.Health (rls_health.h): SERVING
// while RlsServerOptions::serving says so, NOT_SERVING once Drain is called.
//
// Status mapping (docs/envoy.md): OK / OVER_LIMIT are normal responses; a bad
// request is INVALID_ARGUMENT; a store that cannot decide is UNAVAILABLE, so
// Envoy's failure_mode_deny decides.
//
// Thread safety: every method may be called from any thread. Ownership: the
// decider (or Enforcer) and clock are borrowed and must outlive the server. Connections have
// keepalive and idle timeouts; messages are bounded by max_receive_message_bytes.
#ifndef TOLLGATE_SERVER_RLS_RLS_SERVER_H_
#define TOLLGATE_SERVER_RLS_RLS_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/envoy_rls.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace tollgate::rls {

class RlqsQuota;  // src/rls/rlqs_quota.h

struct RlsServerOptions {
  std::string address = "127.0.0.1:8081";  // HOST:PORT; port 0 picks a free one
  // The decider to serve (borrowed; tollgated's, over its Runtime). Null: a
  // standalone one on `enforcer` with `config`, `clock` and `decide`.
  EnvoyDecider* decider = nullptr;
  Enforcer* enforcer = nullptr;             // standalone: required, borrowed
  std::shared_ptr<const RlsConfig> config;  // standalone: required
  const Clock* clock = &SystemClock::Instance();
  RlsDecideOptions decide;
  int max_receive_message_bytes = 1 << 20;
  int keepalive_time_ms = 60'000;        // HTTP/2 PING after this much quiet
  int keepalive_timeout_ms = 20'000;     // ... and drop the connection without a reply
  int max_connection_idle_ms = 600'000;  // close connections without calls
  // SO_REUSEPORT on the listener: a new process may listen on the port while
  // this one drains (tollgated's `reuse_port`). Off: a second server on the
  // port fails to start instead of silently sharing it.
  bool reuse_port = false;
  // TLS (grpc::SslServerCredentials) when tls_cert_pem is set: the PEM
  // certificate chain and key; with tls_client_ca_pem, client certificates are
  // required and verified against it, and with tls_allowed_names a call whose
  // client certificate has no CN or SAN in the list is refused
  // (PERMISSION_DENIED). Empty: plaintext (h2c).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_client_ca_pem;
  std::vector<std::string> tls_allowed_names;
  // Set: the listener's credentials, in place of the PEM fields above
  // (tollgated's reloadable certificates, server/grpc_tls.h); allowed names
  // are still checked from tls_allowed_names.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // grpc.health.v1.Health on the same listener (rls_health.h): SERVING while
  // this returns true (null: always) and neither Drain nor Shutdown was
  // called. Called on gRPC's threads; must not block.
  std::function<bool()> serving;
  // Envoy's Rate Limit Quota Service (rlqs_service.h) on the same listener
  // when set (borrowed; must outlive the server). Null: not served.
  RlqsQuota* rlqs = nullptr;
};

class RlsServer {
 public:
  ~RlsServer();

  int port() const { return port_; }
  // "host:port" with the bound port.
  const std::string& address() const { return address_; }

  // Standalone only (a given decider's configuration reloads with its Runtime).
  void SetConfig(std::shared_ptr<const RlsConfig> config) {
    decider_->SetConfig(std::move(config));
  }
  std::shared_ptr<const RlsConfig> config() const { return decider_->config(); }
  // Standalone only: loads envoyproxy/ratelimit YAML files and swaps them in;
  // on errors the running configuration stays and the errors are returned.
  std::vector<ConfigError> ReloadFiles(const std::vector<std::string>& paths,
                                       const RlsCompileOptions& options = {});

  RlsCounters& counters() const { return decider_->counters(); }
  EnvoyDecider& decider() { return *decider_; }

  // From now on the health service answers NOT_SERVING, while calls are
  // still served (a draining process: health checkers move traffic away
  // before the listener closes). Idempotent.
  void Drain() { stopping_.store(true, std::memory_order_release); }
  // Stops accepting calls, waits up to `grace` for calls in flight, then
  // cancels them. Idempotent.
  void Shutdown(Nanos grace = std::chrono::seconds(1));

  class Impl;

 private:
  friend Result<std::unique_ptr<RlsServer>> StartRlsServer(const RlsServerOptions& options);
  RlsServer() = default;
  std::unique_ptr<EnvoyDecider> own_decider_;  // standalone
  EnvoyDecider* decider_ = nullptr;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::string address_;
  std::atomic<bool> stopping_{false};  // Drain or Shutdown called: NOT_SERVING
};

// Binds, starts serving and returns the running server, or kInvalidArgument
// (no decider and a missing Enforcer/config, or refused decide options) / kUnavailable (the address
// could not be bound).
Result<std::unique_ptr<RlsServer>> StartRlsServer(const RlsServerOptions& options);

}  // namespace tollgate::rls

#endif  // TOLLGATE_SERVER_RLS_RLS_SERVER_H_
