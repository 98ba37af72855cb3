// Fuzz target: the body of POST /v1/keys/get|reset|set (tollgate/key_admin.h
// ParseKeyRequest), the key it names in fuzz/policies/request.json
// (KeyForRule) and the action on a LocalStore.
//
// Input: one byte choosing the action (mod 3: get, reset, set), then the
// JSON body (the session bounds it by max_body_bytes, 64 KiB).
// Properties: a body is either refused with errors, each with a message,
// rendered as one well-framed problem response, or it names a rule, values
// (at most kMaxKeyValues, each at most kMaxKeyValueBytes) and, for set, a
// remaining count. A named key that KeyForRule accepts is a bucket of that
// rule (its bucket key starts with the rule name and a 0x1F); a reset leaves
// it full, and a set leaves exactly the remaining asked for, or is refused
// with kInvalidArgument when that is outside 0..burst.
#include <cstdint>
#include <string_view>

#include "fuzz_enforcer.h"
#include "fuzz_http.h"
#include "fuzz_input.h"
#include "server/http_util.h"
#include "tollgate/key_admin.h"

using tollgate::KeyAction;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto action = static_cast<KeyAction>(data[0] % 3);
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  tollgate::KeyRequest req;
  const auto errors = tollgate::ParseKeyRequest(body, action, &req);
  if (!errors.empty()) {
    for (const auto& e : errors) FUZZ_CHECK(!e.message.empty(), "an error without a message");
    tollgate::fuzz::CheckSerialized(
        tollgate::server::Problem(400, "Invalid key request", "see errors", errors), true, false);
    return 0;
  }
  FUZZ_CHECK(!req.rule.empty(), "accepted without a rule");
  FUZZ_CHECK(req.by_source_given == req.values.empty(), "values and keys both (or neither)");
  FUZZ_CHECK(req.values.size() <= tollgate::kMaxKeyValues, "too many values");
  for (const auto& v : req.values) {
    FUZZ_CHECK(!v || v->size() <= tollgate::kMaxKeyValueBytes, "a value over the bound");
  }
  FUZZ_CHECK(req.remaining.has_value() == (action == KeyAction::kSet), "remaining for set only");
  if (req.by_source_given) return 0;  // placed by source in the handler
  auto env = tollgate::fuzz::FreshEnforcer();
  const tollgate::RuleKeyResult found =
      tollgate::KeyForRule(*tollgate::fuzz::FuzzPolicies()->Current(), req.rule, req.values);
  if (!found.rule_found || !found.status.ok()) {
    FUZZ_CHECK(!found.key, "a key with an error");
    return 0;
  }
  FUZZ_CHECK(found.key.has_value(), "no key without an error");
  const tollgate::RuleKey& key = *found.key;
  FUZZ_CHECK(key.bucket_key.starts_with(req.rule + "\x1f"), "a key outside its rule");
  tollgate::Store& store = *env->store;
  if (action == KeyAction::kReset) {
    FUZZ_CHECK(store.ResetKey(key.bucket_key, key.limit).ok(), "a reset failed");
    auto after = tollgate::InspectKey(store, key.bucket_key, key.limit);
    FUZZ_CHECK(after.ok() && after->remaining == key.limit.burst(), "a reset left no full bucket");
  } else if (action == KeyAction::kSet) {
    auto set = store.SetRemaining(key.bucket_key, key.limit, *req.remaining);
    if (*req.remaining < 0 || *req.remaining > key.limit.burst()) {
      FUZZ_CHECK(!set.ok() && set.status().code() == tollgate::StatusCode::kInvalidArgument,
                 "an out-of-range set was not refused");
      return 0;
    }
    FUZZ_CHECK(set.ok(), "a set failed: " + set.status().ToString());
    auto after = tollgate::InspectKey(store, key.bucket_key, key.limit);
    FUZZ_CHECK(after.ok() && after->remaining == *req.remaining, "a set left another remaining");
  }
  return 0;
}
