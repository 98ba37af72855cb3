#include "tollgate/rollback_admin.h"

#include <nlohmann/json.hpp>

namespace tollgate {
namespace {

using json = nlohmann::json;

json FleetView(const RollbackFleet& fleet, int64_t now) {
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
      st.last_read_ns == 0 ? json(nullptr) : json((now - st.last_read_ns) / 1'000'000);
  if (!st.last_error.empty()) view["last_error"] = st.last_error;
  return view;
}

}  // namespace

json TrippedRulesJson(const std::vector<RuleCounters>& counters) {
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

json RollbackViewJson(const Runtime& runtime, int64_t now) {
  json rules = json::array();
  for (const RuleCounters& c : runtime.enforcer().Counters()) {
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
  const RollbackFleet* fleet = runtime.rollback_fleet();
  json view = {{"scope", fleet ? "fleet" : "instance"}, {"rules", std::move(rules)}};
  if (fleet) view["fleet"] = FleetView(*fleet, now);
  return view;
}

RollbackActionResult AdministerRollback(const Runtime& runtime, const std::string& rule, bool trip,
                                        std::string_view reason) {
  RollbackActionResult result;
  Enforcer& enforcer = runtime.enforcer();
  bool known = false;
  for (RuleCounters& c : enforcer.Counters()) {
    if (c.rule == rule) {
      result.before = std::move(c);
      known = true;
    }
  }
  result.done =
      trip ? enforcer.TripRollback(rule, reason.empty() ? std::string_view("admin") : reason)
           : known && enforcer.ResetRollback(rule);
  if (result.done && runtime.rollback_fleet() != nullptr) {
    result.fleet = true;
    result.published = runtime.PublishRollback(rule, trip);
  }
  return result;
}

json RollbackPublishJson(const Runtime::RollbackPublish& sent) {
  if (!sent.policy_rule) return {{"published", false}, {"error", "not a policy rule"}};
  if (!sent.status.ok()) {
    return {{"published", false}, {"queued", true}, {"error", sent.status.message()}};
  }
  return {{"published", true},
          {"epoch", sent.record.epoch},
          {"tripped", sent.record.tripped},
          {"origin", sent.record.origin}};
}

}  // namespace tollgate
