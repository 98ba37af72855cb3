#include "server/rollback_admin.h"

#include "server/handlers.h"
#include "tollgate/policy_name.h"
#include "tollgate/rollback_admin.h"

namespace tollgate::server {

using json = nlohmann::json;

Response HandleRollbackView(const Runtime& s) {
  return JsonResponse(200, RollbackViewJson(*s.engine, s.clock->Now()));
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
  const RollbackActionResult done = AdministerRollback(*s.engine, rule, trip, reason);
  if (!done.done) return Problem(404, "", "no rule named \"" + Logger::Client(rule) + "\"");
  const RuleCounters& before = done.before;
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
  if (done.fleet) {
    answer["fleet"] = RollbackPublishJson(done.published);
    audit["fleet"] = answer["fleet"];
  }
  s.log->Warn(trip ? "rollback_tripped" : "rollback_cleared", audit);
  return JsonResponse(200, answer);
}

}  // namespace tollgate::server
