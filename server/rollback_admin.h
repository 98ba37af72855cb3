// Internal: the rollback guard's admin view and actions (docs/operations.md,
// "Automated rollback"), and its sharing across the fleet: the HTTP side of
// tollgate/rollback_admin.h (the view, the action and the fleet send).
//
//   GET  /v1/rollback                       every rule's guard: tripped, trigger, reason,
//                                           origin, counts; the fleet's sync state
//   POST /v1/rollback/clear?rule=NAME       clears a trip: the rule enforces again
//   POST /v1/rollback/trip?rule=NAME&reason=TEXT
//                                           trips by hand: the rule decides in shadow
//
// Admin listener only, behind the admin token like /v1/reload; every action
// writes one audit log line ("rollback_cleared" / "rollback_tripped": rule,
// whether it was tripped and why, the caller's address, the trace id).
// Scope: on the local store an action changes this instance only; on a remote
// store (store.share_rollback, the default) it is also sent to the fleet
// (RollbackFleet::PublishNow, one Redis round trip on the server's admin
// executor, never on a worker, as key administration) and the answer says whether the fleet has it
// ("fleet":
// {"published": true, "epoch": N}) or it was queued for the fleet's thread.
//
// Thread safety: as every handler (server/endpoints.h).
#ifndef TOLLGATE_SERVER_ROLLBACK_ADMIN_H_
#define TOLLGATE_SERVER_ROLLBACK_ADMIN_H_

#include <string_view>

#include "server/http_util.h"
#include "server/runtime.h"

namespace tollgate::server {

// The query of /v1/rollback/clear and /v1/rollback/trip: rule=NAME (once, a
// policy name, tollgate/policy_name.h) and, for a trip, reason=TEXT (cut to
// kMaxRollbackReason bytes). Every problem (at most kMaxRollbackQueryErrors)
// with the parameter's name; the values are percent-decoded.
inline constexpr size_t kMaxRollbackReason = 200;
inline constexpr size_t kMaxRollbackQueryErrors = 8;
struct RollbackQuery {
  std::string rule;
  std::string reason;
};
std::vector<ConfigError> ParseRollbackQuery(std::string_view query, bool trip, RollbackQuery* out);

Response HandleRollbackView(const Runtime& s);
// `trip`: /v1/rollback/trip, else /v1/rollback/clear. `peer`, `token` (the
// caller's admin token name, "" without one) and `trace_id` go into the audit line.
Response HandleRollbackAction(const Runtime& s, bool trip, std::string_view query,
                              std::string_view peer, std::string_view token,
                              std::string_view trace_id);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_ROLLBACK_ADMIN_H_
