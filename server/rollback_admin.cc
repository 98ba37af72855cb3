#include "server/rollback_admin.h"

#include <algorithm>

namespace tollgate::server {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxReason = 200;

Response Json(int status, const json& j) {
  Response r;
  r.status = status;
  r.content_type = kJson;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  return r;
}

}  // namespace

json TrippedRules(const std::vector<RuleCounters>& counters) {
  json out = json::array();
  for (const RuleCounters& c : counters) {
    if (!c.rolled_back) continue;
    out.push_back({{"rule", c.rule},
                   {"trigger", RollbackTriggerName(c.rollback_trigger)},
                   {"reason", c.rollback_reason}});
  }
  return out;
}

Response HandleRollbackView(const Runtime& s) {
  json rules = json::array();
  for (const RuleCounters& c : s.enforcer->Counters()) {
    json trips = json::object();
    for (size_t t = 1; t < kRollbackTriggerCount; ++t) {
      trips[std::string(RollbackTriggerName(RollbackTrigger(t)))] = c.rollback_trips[t];
    }
    rules.push_back({{"rule", c.rule},
                     {"tripped", c.rolled_back},
                     {"trigger", RollbackTriggerName(c.rollback_trigger)},
                     {"reason", c.rollback_reason},
                     {"trips", std::move(trips)},
                     {"clears", c.rollback_clears}});
  }
  return Json(200, {{"scope", "instance"}, {"rules", std::move(rules)}});
}

Response HandleRollbackAction(const Runtime& s, bool trip, std::string_view query,
                              std::string_view peer, std::string_view trace_id) {
  std::string rule, reason;
  std::vector<ConfigError> errors;
  ForEachQueryParam(query, [&](std::string_view name, std::string_view value) {
    if (name == "rule") {
      rule = value;
    } else if (name == "reason" && trip) {
      reason = value.substr(0, kMaxReason);
    } else {
      errors.push_back({std::string(name).substr(0, 64),
                        trip ? "unknown parameter (rule, reason)" : "unknown parameter (rule)"});
    }
  });
  if (rule.empty()) errors.push_back({"rule", "is required"});
  if (!errors.empty()) return Problem(400, "Bad query", "", errors);
  // Before the action: what the guard was, for the audit line.
  RuleCounters before;
  bool known = false;
  for (RuleCounters& c : s.enforcer->Counters()) {
    if (c.rule == rule) {
      before = std::move(c);
      known = true;
    }
  }
  const bool done = trip ? s.enforcer->TripRollback(rule, reason.empty() ? "admin" : reason)
                         : known && s.enforcer->ResetRollback(rule);
  if (!done) return Problem(404, "", "no rule named \"" + Logger::Client(rule) + "\"");
  json audit = {{"rule", Logger::Client(rule)},
                {"was_tripped", before.rolled_back},
                {"peer", std::string(peer)}};
  if (before.rolled_back) {
    audit["was_trigger"] = RollbackTriggerName(before.rollback_trigger);
    audit["was_reason"] = before.rollback_reason;
  }
  if (trip) audit["reason"] = Logger::Client(reason);
  if (!trace_id.empty()) audit["trace_id"] = std::string(trace_id);
  s.log->Warn(trip ? "rollback_tripped" : "rollback_cleared", audit);
  return Json(200, {{"ok", true},
                    {"rule", rule},
                    {"tripped", trip},
                    {"was_tripped", before.rolled_back},
                    {"scope", "instance"}});
}

}  // namespace tollgate::server
