#include "server/rollback_admin.h"

#include <algorithm>

#include "server/handlers.h"
#include "tollgate/policy_name.h"

namespace tollgate::server {

using json = nlohmann::json;

json TrippedRules(const std::vector<RuleCounters>& counters) {
  json out = json::array();
  for (const RuleCounters& c : counters) {
    if (!c.rolled_back) continue;
    json rule = {{"rule", c.rule},
                 {"trigger", RollbackTriggerName(c.rollback_trigger)},
                 {"reason", c.rollback_reason}};
    if (!c.rollback_origin.empty()) rule["origin"] = c.rollback_origin;
    out.push_back(std::move(rule));
  }
  return out;
}

namespace {

json FleetView(const Runtime& s) {
  const RollbackFleet& fleet = *s.rollback_fleet;
  const RollbackFleetStats st = fleet.stats();
  json view = {{"key", fleet.key()},
               {"instance", fleet.instance_id()},
               {"reads", st.reads},
               {"read_failures", st.read_failures},
               {"publishes", st.publishes},
               {"publish_failures", st.publish_failures},
               {"bad_records", st.bad_records},
               {"pending", st.pending}};
  view["last_read_age_ms"] =
      st.last_read_ns == 0 ? json(nullptr) : json((s.clock->Now() - st.last_read_ns) / 1'000'000);
  if (!st.last_error.empty()) view["last_error"] = st.last_error;
  return view;
}

// Sends an operator's action to the fleet: the rule's state here after it.
json PublishAction(const Runtime& s, const std::string& rule, bool trip) {
  const tollgate::Runtime::RollbackPublish sent = s.engine->PublishRollback(rule, trip);
  if (!sent.policy_rule) return {{"published", false}, {"error", "not a policy rule"}};
  if (!sent.status.ok()) {
    return {{"published", false}, {"queued", true}, {"error", sent.status.message()}};
  }
  return {{"published", true},
          {"epoch", sent.record.epoch},
          {"tripped", sent.record.tripped},
          {"origin", sent.record.origin}};
}

}  // namespace

Response HandleRollbackView(const Runtime& s) {
  json rules = json::array();
  for (const RuleCounters& c : s.enforcer->Counters()) {
    json trips = json::object();
    for (size_t t = 1; t < kRollbackTriggerCount; ++t) {
      trips[std::string(RollbackTriggerName(RollbackTrigger(t)))] = c.rollback_trips[t];
    }
    json rule = {
        {"rule", c.rule},
        {"tripped", c.rolled_back},
        {"trigger", RollbackTriggerName(c.rollback_trigger)},
        {"reason", c.rollback_reason},
        {"trips", std::move(trips)},
        {"clears", c.rollback_clears},
        {"adopted", {{"trips", c.rollback_adopted_trips}, {"clears", c.rollback_adopted_clears}}}};
    if (!c.rollback_origin.empty()) rule["origin"] = c.rollback_origin;
    rules.push_back(std::move(rule));
  }
  json view = {{"scope", s.rollback_fleet ? "fleet" : "instance"}, {"rules", std::move(rules)}};
  if (s.rollback_fleet) view["fleet"] = FleetView(s);
  return JsonResponse(200, view);
}

std::vector<ConfigError> ParseRollbackQuery(std::string_view query, bool trip, RollbackQuery* out) {
  std::vector<ConfigError> errors;
  bool rule_given = false;
  auto error = [&](std::string path, std::string message) {
    if (errors.size() < kMaxRollbackQueryErrors) errors.push_back({std::move(path), message});
  };
  ForEachQueryParam(query, [&](std::string_view name, std::string_view value) {
    if (name == "rule") {
      if (rule_given) return error("rule", "given more than once");
      rule_given = true;
      if (!IsPolicyName(value)) {
        return error("rule", "must be a rule name (1 to " + std::to_string(kMaxPolicyNameLength) +
                                 " letters, digits, '-', '_', '.' or ':')");
      }
      out->rule = value;
    } else if (name == "reason" && trip) {
      out->reason = value.substr(0, kMaxRollbackReason);
    } else {
      error(Logger::Client(name.substr(0, 64)),
            trip ? "unknown parameter (rule, reason)" : "unknown parameter (rule)");
    }
  });
  if (!rule_given) error("rule", "is required");
  return errors;
}

Response HandleRollbackAction(const Runtime& s, bool trip, std::string_view query,
                              std::string_view peer, std::string_view token,
                              std::string_view trace_id) {
  RollbackQuery q;
  std::vector<ConfigError> errors = ParseRollbackQuery(query, trip, &q);
  if (!errors.empty()) return Problem(400, "Bad query", "", errors);
  const std::string& rule = q.rule;
  const std::string& reason = q.reason;
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
                {"peer", std::string(peer)},
                {"token", token.empty() ? json(nullptr) : json(std::string(token))}};
  if (before.rolled_back) {
    audit["was_trigger"] = RollbackTriggerName(before.rollback_trigger);
    audit["was_reason"] = before.rollback_reason;
  }
  if (trip) audit["reason"] = Logger::Client(reason);
  if (!trace_id.empty()) audit["trace_id"] = std::string(trace_id);
  json answer = {{"ok", true},
                 {"rule", rule},
                 {"tripped", trip},
                 {"was_tripped", before.rolled_back},
                 {"scope", s.rollback_fleet ? "fleet" : "instance"}};
  if (s.rollback_fleet) {
    answer["fleet"] = PublishAction(s, rule, trip);
    audit["fleet"] = answer["fleet"];
  }
  s.log->Warn(trip ? "rollback_tripped" : "rollback_cleared", audit);
  return JsonResponse(200, answer);
}

}  // namespace tollgate::server
