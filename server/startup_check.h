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
// with grpc_listen, the rls_config YAML compiled for the configured store.
// Errors carry the config path ("trusted_proxies[1]: ...") or the file
// ("/etc/tollgate/policy.json: rules[0].name: ...").
//
// Thread safety: reads files; no shared state.
#ifndef TOLLGATE_SERVER_STARTUP_CHECK_H_
#define TOLLGATE_SERVER_STARTUP_CHECK_H_

#include <vector>

#include "server/config.h"

namespace tollgate::server {

std::vector<ConfigError> CheckServerConfig(const ServerConfig& config);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_STARTUP_CHECK_H_
