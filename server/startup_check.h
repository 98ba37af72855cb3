// CheckServerConfig: every check tollgated makes of its configuration before
// it binds a port or connects to a store.
//
// Server::Create runs it first and refuses to start on any error, and
// `tollgated --check` runs nothing else, so a config that --check accepts
// cannot be refused at start for a configuration reason, and the other way
// round, with the same messages. What only a start can find out (a port in
// use, an upstream name that does not resolve, an unreachable store) is not
// checked.
//
// It covers ValidateServerConfig (ranges, listeners, the admin token), each
// trusted proxy, the store URL (parsed, not connected), the policy file and,
// with grpc_listen, the rls_config YAML compiled for the configured store, and
// each listener's TLS files (read, parsed, key matched to the certificate)
// and an https:// upstream's (gateway.upstream_tls: CA file, client
// certificate and key).
// Errors carry the config path ("trusted_proxies[1]: ...") or the file
// ("/etc/tollgate/policy.json: rules[0].name: ...").
//
// Thread safety: reads files; no shared state.
#ifndef TOLLGATE_SERVER_STARTUP_CHECK_H_
#define TOLLGATE_SERVER_STARTUP_CHECK_H_

#include <string>
#include <vector>

#include "server/config.h"

namespace tollgate::server {

// `warnings` (optional) gets what does not stop a start: a listener's
// certificate that expired or is not valid yet, an upstream's certificate not
// verified (gateway.upstream_tls.verify false) (tollgated prints them).
std::vector<ConfigError> CheckServerConfig(const ServerConfig& config,
                                           std::vector<ConfigError>* warnings = nullptr);

// The SSL_CTX of an https:// gateway.upstream (server/upstream_tls.h), or
// null: no https upstream, or `errors` under "gateway.upstream_tls". The
// client context of tollgate/tls.h, verification off only with
// upstream_tls_verify false. `warnings`: a client certificate out of its
// dates, verification off. CheckServerConfig builds it (and drops it); a
// start builds it again for the gateway.
SslCtxPtr MakeUpstreamTlsContext(const ServerConfig& config, int64_t now_unix,
                                 std::vector<ConfigError>* errors,
                                 std::vector<ConfigError>* warnings);

// `tollgated --check` only (a start reads them as it opens the policy): the
// policy file's Redis tenant tables ("tenants": {"redis_hash": ...}) read
// from the configured store as a start reads them, each invalid one an error
// ("<policy>: rules[0].tenants: redis hash plans field \"x\": ..."). When the
// store cannot be reached the tables are left unchecked and *unchecked says
// so; nothing is read for an etcd policy or a policy without such a table.
std::vector<ConfigError> CheckTenantTables(const ServerConfig& config, std::string* unchecked);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_STARTUP_CHECK_H_
