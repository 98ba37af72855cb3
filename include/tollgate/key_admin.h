// Key administration: look at one key's state for a rule, forget it, or set
// how many tokens it has left, on a Runtime's store, without a socket.
// tollgated's /v1/keys/get|reset|set (docs/operations.md, "Key
// administration") is one front end over it: it parses the body with
// ParseKeyRequest, calls AdministerKey, and writes the answer
// (KeyAdminAnswer) and its audit line; an embedder can do the same.
//
// A key is named as operators think of it: the rule and the values of its
// limit_keys, in order (`values`, nullopt for an absent source), or by source
// (`by_source`: {"header:x-api-key", "k1"}). The store key comes from
// KeyForRule (tollgate/policy.h), the Enforcer's own derivation, and the
// store's ResetKey / SetRemaining (tollgate/store.h) change it atomically, on
// every store.
//
// Errors: every problem of a request is a ConfigError naming its field (rule,
// values[i], keys.<source>, remaining); a rule the running policy does not have
// is kUnknownRule; a store failure is kStoreFailed with the store's Status (the
// key is then as it was, or as the store last wrote it).
//
// Needs nlohmann-json (header-only) on the include path, as
// tollgate/json_fields.h. Thread safety: the functions are pure but for
// AdministerKey, which may be called from any thread and blocks for up to one
// store call timeout per store call (at most three: inspect, action, inspect).
// Implemented in tollgate_runtime (src/runtime/key_admin.cc).
#ifndef TOLLGATE_KEY_ADMIN_H_
#define TOLLGATE_KEY_ADMIN_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tollgate/config_error.h"
#include "tollgate/decision.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"

namespace tollgate {

class Runtime;

enum class KeyAction : uint8_t { kGet, kReset, kSet };
inline constexpr size_t kKeyActionCount = 3;
std::string_view KeyActionName(KeyAction action);  // "get", "reset", "set"

// A key administration request, as ParseKeyRequest reads it.
struct KeyRequest {
  std::string rule;
  std::vector<std::optional<std::string>> values;  // in limit_keys order
  // Values by source spec, placed by the rule's limit_keys (AdministerKey).
  std::vector<std::pair<std::string, std::optional<std::string>>> by_source;
  bool by_source_given = false;
  std::optional<int64_t> remaining;  // set only
  bool raw = false;                  // show the identity unhashed (the caller's to allow)
};
inline constexpr size_t kMaxKeyValues = 32;
inline constexpr size_t kMaxKeyValueBytes = 4096;

// A "values" array at `path`: 1 to kMaxKeyValues strings (at most
// kMaxKeyValueBytes each) or nulls (the source absent), appended to *out in
// order. The key routes and tollgated's /v1/decide items name a key with it;
// false, with each problem's path (values, values[i]) in *errors, when it is
// not one.
bool ParseKeyValues(const nlohmann::json& values, const std::string& path,
                    std::vector<std::optional<std::string>>* out, std::vector<ConfigError>* errors);
// Every problem of the JSON `body` ({"rule", "values" | "keys", "remaining"
// (set only), "raw"}) for `action`, with the field's path; empty when *out is
// a request. The body's size is the caller's to bound.
std::vector<ConfigError> ParseKeyRequest(std::string_view body, KeyAction action, KeyRequest* out);

// What AdministerKey did. Fields are set as far as the action got: `key` once
// the request named a key, `before` once the store answered for it, `after`
// once a reset or set was made.
struct KeyAdminResult {
  enum class Outcome : uint8_t { kOk, kInvalid, kUnknownRule, kStoreFailed };
  Outcome outcome = Outcome::kOk;
  std::vector<ConfigError> errors;  // kInvalid: every problem, with its field's path
  Status status;                    // kStoreFailed: the store's
  std::string why;                  // not kOk: one line for an audit log
  std::optional<RuleKey> key;
  std::optional<Decision> before;
  std::optional<Decision> after;  // reset and set only
  // A rule with block_for: how much longer the key's penalty box was closed
  // before the action (0: open). A reset opens it too.
  std::optional<Nanos> blocked_for;
};

// Resolves `request` against the running policy (Runtime::view) and applies
// `action` to the key on the Runtime's store. A `remaining` outside the rule's
// 0..burst is kInvalid (path "remaining") before the store is asked.
KeyAdminResult AdministerKey(const Runtime& runtime, KeyAction action, KeyRequest request);

// A key's state as the admin API and the audit log show it: remaining, limit,
// used (what the key has taken of its limit: tokens, or the window's count,
// weighted by the previous window for sliding_window) and reset_after_ms.
nlohmann::json KeyStateJson(const Decision& decision);
// The answer of a successful action: rule, key (`shown_key`: the identity as
// the caller may see it), limit_keys, algorithm, limit, before, and after
// unless `action` is kGet; blocked_ms (the penalty box's time left before the
// action, 0 when open) for a block_for rule.
nlohmann::json KeyAdminAnswer(const KeyAdminResult& result, KeyAction action,
                              std::string_view shown_key);

}  // namespace tollgate

#endif  // TOLLGATE_KEY_ADMIN_H_
