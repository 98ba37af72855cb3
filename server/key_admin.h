// Internal: key administration on the admin listener (docs/operations.md,
// "Key administration"): look at one key's state for a rule, forget it, or
// set how many tokens it has left.
//
//   POST /v1/keys/get    {"rule": "api", "values": ["k1"]}
//   POST /v1/keys/reset  {"rule": "api", "values": ["k1"]}
//   POST /v1/keys/set    {"rule": "api", "values": ["k1"], "remaining": 0}
//
// A key is named as operators think of it: the rule and the values of its
// limit_keys, in order ("values", null for an absent source), or by source
// ("keys": {"header:x-api-key": "k1"}). The store key comes from KeyForRule
// (tollgate/policy.h), the Enforcer's own derivation, and the store's
// ResetKey / SetRemaining (tollgate/store.h) change it atomically, on every
// store. The routes need the admin token like every admin route (the session
// checks it, server/endpoints.h); "raw": true shows the identity unhashed in
// the answer, with the same rule as ?raw=1 elsewhere.
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
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/endpoints.h"

namespace tollgate::server {

enum class KeyAction : uint8_t { kGet, kReset, kSet };
std::string_view KeyActionName(KeyAction action);  // "get", "reset", "set"

// The parsed body of a key administration request.
struct KeyRequest {
  std::string rule;
  std::vector<std::optional<std::string>> values;  // in limit_keys order (after ResolveValues)
  // "keys": values by source spec, placed by the rule's limit_keys.
  std::vector<std::pair<std::string, std::optional<std::string>>> by_source;
  bool by_source_given = false;
  std::optional<int64_t> remaining;  // set only
  bool raw = false;
};
inline constexpr size_t kMaxKeyValues = 32;
inline constexpr size_t kMaxKeyValueBytes = 4096;
// A "values" array at `path`: 1 to kMaxKeyValues strings (at most
// kMaxKeyValueBytes each) or nulls (the source absent), appended to *out in
// order. The key routes and /v1/decide items name a key with it; false, with
// each problem's path (values, values[i]) in *errors, when it is not one.
bool ParseKeyValues(const nlohmann::json& values, const std::string& path,
                    std::vector<std::optional<std::string>>* out, std::vector<ConfigError>* errors);
// Every problem of `body` for `action`, with the field's path.
std::vector<ConfigError> ParseKeyRequest(std::string_view body, KeyAction action, KeyRequest* out);

boost::asio::awaitable<Response> KeyGet(const Request& request, const Runtime& rt);
boost::asio::awaitable<Response> KeyReset(const Request& request, const Runtime& rt);
boost::asio::awaitable<Response> KeySet(const Request& request, const Runtime& rt);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_KEY_ADMIN_H_
