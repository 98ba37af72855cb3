// Rollback administration: the rollback guards' view and an operator's trip
// or clear of one rule's guard, on a Runtime, without a socket. tollgated's
// GET /v1/rollback and POST /v1/rollback/{trip,clear} (docs/operations.md,
// "Automated rollback") are one front end over it: they read the query, call
// these, and write the answer and the audit line.
//
// Scope: on the local store an action changes this instance's Enforcer only;
// with a fleet (Runtime::rollback_fleet(), a remote store with
// share_rollback) it is also sent to the fleet now (Runtime::PublishRollback:
// one Redis round trip, blocking; a failed send is queued for the fleet's
// thread).
//
// Needs nlohmann-json (header-only) on the include path, as
// tollgate/json_fields.h. Thread safety: every function may be called from any
// thread; AdministerRollback blocks for up to one Redis call with a fleet.
// Implemented in tollgate_runtime (src/runtime/rollback_admin.cc).
#ifndef TOLLGATE_ROLLBACK_ADMIN_H_
#define TOLLGATE_ROLLBACK_ADMIN_H_

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/rule_counters.h"
#include "tollgate/runtime.h"

namespace tollgate {

// The tripped rules ([{rule, trigger, reason[, origin]}]), for a readiness
// view and the rollback view.
nlohmann::json TrippedRulesJson(const std::vector<RuleCounters>& counters);

// Every rule's guard (tripped, trigger, reason, origin, trips by trigger,
// clears, adopted), the scope ("fleet" or "instance") and, with a fleet, its
// sync state; `now` is the Runtime's decision clock (RuntimeEnv::clock) now.
nlohmann::json RollbackViewJson(const Runtime& runtime, int64_t now);

struct RollbackActionResult {
  bool done = false;    // false: the running policy has no rule so named; nothing changed
  RuleCounters before;  // the rule's guard before the action
  bool fleet = false;   // sent to the fleet: `published` is the send's
  Runtime::RollbackPublish published;
};
// Trips (`trip`; the rule then decides in shadow, `reason` "" = "admin") or
// clears `rule`'s guard on the Runtime's Enforcer, then sends it to the fleet.
RollbackActionResult AdministerRollback(const Runtime& runtime, const std::string& rule, bool trip,
                                        std::string_view reason);
// A fleet send as the rollback answer shows it: {"published": true, "epoch",
// "tripped", "origin"}, or {"published": false, "queued": true, "error"}.
nlohmann::json RollbackPublishJson(const Runtime::RollbackPublish& published);

}  // namespace tollgate

#endif  // TOLLGATE_ROLLBACK_ADMIN_H_
