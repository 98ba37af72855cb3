#include "server/status_page.h"

#include <nlohmann/json.hpp>
#include <string>

#include "server/handlers.h"
#include "server/ui_assets.h"
#include "tollgate/failure_mode.h"
#include "tollgate/rollback_admin.h"
#include "tollgate/rule_counters.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

struct UiAsset {
  std::string_view path;
  std::string_view content_type;
  const std::string_view* body;
};

constexpr UiAsset kUiAssets[] = {
    {"/ui", "text/html; charset=utf-8", &ui_assets::kIndexHtml},
    {"/ui/app.js", "text/javascript; charset=utf-8", &ui_assets::kAppJs},
    {"/ui/app.css", "text/css; charset=utf-8", &ui_assets::kAppCss},
    {"/ui/icon.svg", "image/svg+xml", &ui_assets::kIconSvg},
};

json DecisionsJson(const RuleCounters* c) {
  json d = json::object();
#define TOLLGATE_STATUS_DECISION(field, label) d[#label] = c ? c->field : 0;
  TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_STATUS_DECISION)
#undef TOLLGATE_STATUS_DECISION
  return d;
}

json CallerJson(const Runtime& s, const AdminToken* caller, bool may_show_raw) {
  // Without a token configured, whoever reaches the (loopback) admin
  // listener may change state: the page shows the write controls.
  const bool tokens = !s.admin_tokens->empty();
  const AdminScope scope = caller ? caller->scope : tokens ? AdminScope::kRead : AdminScope::kWrite;
  return {{"token", caller ? json(caller->name) : json(nullptr)},
          {"scope", AdminScopeName(scope)},
          {"tokens_configured", tokens},
          {"may_show_raw", may_show_raw}};
}

// The policy's rules with their counters; counters of rules the policy no
// longer has (a reload removed them) are left out.
json RulesJson(const Runtime& s, const std::vector<RuleCounters>& counters) {
  json rules = json::array();
  for (const RuleSummary& r : SummarizePolicy(*s.policies->Current())) {
    const RuleCounters* c = nullptr;
    for (const RuleCounters& candidate : counters) {
      if (candidate.rule == r.name) c = &candidate;
    }
    json rule = {{"name", r.name},
                 {"group", r.group},
                 {"limit_keys", r.limit_keys},
                 {"limit", r.limit.ToString()},
                 {"description", r.description},
                 {"shadow", r.shadow},
                 {"enforce_percent", r.enforce_percent},
                 {"decisions", DecisionsJson(c)},
                 {"rolled_back", c != nullptr && c->rolled_back}};
    if (c != nullptr && c->rolled_back) {
      rule["rollback"] = {{"trigger", RollbackTriggerName(c->rollback_trigger)},
                          {"reason", c->rollback_reason},
                          {"origin", c->rollback_origin}};
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

json TopJson(const Runtime& s, bool raw) {
  json rules = json::array();
  for (auto& rt : s.top->Top(10, s.clock->Now())) {
    json top = json::array();
    for (const auto& e : rt.top) {
      top.push_back(
          {{"key", s.identities.Show(e.key, raw)}, {"rejected", e.count}, {"error", e.error}});
    }
    rules.push_back({{"rule", rt.rule}, {"top", std::move(top)}});
  }
  return {{"window_seconds", s.config->top_window.count() / 1000},
          {"raw", raw},
          {"rules", std::move(rules)}};
}

}  // namespace

Response HandleUiAsset(std::string_view path) {
  for (const UiAsset& a : kUiAssets) {
    if (a.path != path) continue;
    Response r;
    r.content_type = a.content_type;
    r.body = std::string(*a.body);
    r.headers.push_back({"Content-Security-Policy", std::string(kUiContentSecurityPolicy)});
    r.headers.push_back({"X-Content-Type-Options", "nosniff"});
    r.headers.push_back({"X-Frame-Options", "DENY"});
    r.headers.push_back({"Referrer-Policy", "no-referrer"});
    r.headers.push_back({"Cache-Control", "no-store"});
    r.headers.push_back({"Cross-Origin-Opener-Policy", "same-origin"});
    r.headers.push_back({"Cross-Origin-Resource-Policy", "same-origin"});
    return r;
  }
  return Problem(404, "", "no such file of the status page");
}

Response HandleStatus(const Runtime& s, std::string_view query, const AdminToken* caller,
                      bool may_show_raw) {
  std::vector<ConfigError> errors;
  ForEachQueryParam(query, [&](std::string_view name, std::string_view) {
    if (name != "raw") errors.push_back({std::string(name), "unknown parameter (raw)"});
  });
  if (!errors.empty()) return Problem(400, "Bad query", "", errors);
  const bool raw = RawRequested(query);
  if (raw && !may_show_raw) return RawNeedsToken();

  const std::vector<RuleCounters> counters = s.enforcer->Counters();
  const PolicyStore::ReloadResult last = s.policies->last_reload();
  json reload_errors = json::array();
  for (const ConfigError& e : last.errors) {
    reload_errors.push_back({{"path", e.path}, {"message", e.message}});
  }
  const bool ready = !s.state->Draining() && s.engine->Ready();
  json j = {{"status_api", 1},
            {"wall_time_ns", s.clock->WallNow()},
            {"start_wall_time_ns", s.start_wall_ns},
            {"caller", CallerJson(s, caller, may_show_raw)},
            {"ready", ready},
            {"draining", s.state->Draining()},
            {"policy",
             {{"source", s.policy_source},
              {"version", s.policies->version()},
              {"generation", s.policies->generation()},
              {"last_reload",
               {{"ok", last.ok}, {"wall_time_ns", last.wall_time_ns}, {"errors", reload_errors}}},
              {"reload_failures", s.policies->reload_failures()}}},
            {"store",
             {{"description", s.engine->store_description()},
              {"healthy", s.engine->StoreHealthy()},
              {"backing_healthy", s.engine->BackingHealthy()},
              {"failure_mode", FailureModeName(s.config->failure_mode)}}},
            {"rules", RulesJson(s, counters)},
            {"rollback", RollbackViewJson(*s.engine, s.clock->Now())},
            {"top", TopJson(s, raw)}};
  return JsonResponse(200, j);
}

}  // namespace tollgate::server
