// Internal: key administration on the admin listener (docs/operations.md,
// "Key administration"): the HTTP side of tollgate/key_admin.h.
//
//   POST /v1/keys/get    {"rule": "api", "values": ["k1"]}
//   POST /v1/keys/reset  {"rule": "api", "values": ["k1"]}
//   POST /v1/keys/set    {"rule": "api", "values": ["k1"], "remaining": 0}
//
// The body is read by ParseKeyRequest and the action made by AdministerKey
// (tollgate/key_admin.h: the key's derivation, the store calls); these
// handlers add what is tollgated's. The routes need the admin token like every
// admin route (the session checks it, server/endpoints.h); "raw": true shows
// the identity unhashed in the answer, with the same rule as ?raw=1 elsewhere.
//
// Every action, a look included, is one audit log line (`key_admin`: action,
// actor, rule, key as the logs show identities, before and after, result)
// and one count in tollgate_admin_key_actions_total{action,result}.
//
// Errors: 400 problem naming the field (rule, values[i], keys.<source>,
// remaining), 404 for a rule the running policy does not have, 503 when the
// store failed (the key is then as it was, or as the store last wrote it).
//
// Thread safety: the handlers are awaited on the session's worker; the action
// itself (the store calls, up to the store's call timeout each) runs on the
// server's admin executor (ServerState::admin_executor), so a slow or stalled
// Redis never holds up the decisions of the worker's other connections.
#ifndef TOLLGATE_SERVER_KEY_ADMIN_H_
#define TOLLGATE_SERVER_KEY_ADMIN_H_

#include <boost/asio/awaitable.hpp>

#include "server/endpoints.h"

namespace tollgate::server {

boost::asio::awaitable<Response> KeyGet(const Request& request, const Runtime& rt);
boost::asio::awaitable<Response> KeyReset(const Request& request, const Runtime& rt);
boost::asio::awaitable<Response> KeySet(const Request& request, const Runtime& rt);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_KEY_ADMIN_H_
