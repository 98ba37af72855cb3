// The admin policy API: GET and PUT /v1/policy (server/handlers.h).
#include <memory>
#include <string>

#include "server/handlers.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

json ErrorsJson(const std::vector<ConfigError>& errors) {
  json out = json::array();
  for (const auto& e : errors) out.push_back({{"path", e.path}, {"message", e.message}});
  return out;
}

bool DryRunRequested(std::string_view query, std::vector<ConfigError>* errors) {
  bool dry_run = false;
  ForEachQueryParam(query, [&](std::string_view name, std::string_view value) {
    if (name != "dry_run") return;
    if (value == "1" || value == "true") {
      dry_run = true;
    } else if (value != "0" && value != "false") {
      errors->push_back({"dry_run", "must be 1, true, 0 or false"});
    }
  });
  return dry_run;
}

}  // namespace

Response HandlePolicy(const Runtime& s) {
  std::shared_ptr<const Policy> policy = s.policies->Current();
  json rules = json::array();
  for (const RuleSummary& r : SummarizePolicy(*policy)) {
    rules.push_back({{"name", r.name},
                     {"group", r.group},
                     {"limit_keys", r.limit_keys},
                     {"limit", r.limit.ToString()},
                     {"shadow", r.shadow},
                     {"enforce_percent", r.enforce_percent},
                     {"description", r.description}});
  }
  PolicyStore::ReloadResult last = s.policies->last_reload();
  return JsonResponse(200, {{"path", s.policies->path()},
                            {"source", s.policy_source},
                            {"version", s.policies->version()},
                            {"generation", s.policies->generation()},
                            {"rules", std::move(rules)},
                            {"text", s.policies->text()},
                            {"last_reload",
                             {{"ok", last.ok},
                              {"wall_time_ns", last.wall_time_ns},
                              {"errors", ErrorsJson(last.errors)}}},
                            {"reload_failures", s.policies->reload_failures()}});
}

Response HandlePolicyPut(const Runtime& s, std::string_view body, std::string_view query,
                         std::string_view actor) {
  std::vector<ConfigError> query_errors;
  const bool dry_run = DryRunRequested(query, &query_errors);
  if (!query_errors.empty())
    return Problem(400, "Invalid policy query", "see errors", query_errors);
  // Checked as a reload would parse it, except that Redis tenant tables are
  // not read here, on a worker: put_policy checks them (and the rls_config)
  // before it stores anything. A policy given over the network names value
  // files only when the config allows it (policy_remote_files; issue 29).
  tollgate::Runtime::PolicyPreview preview = s.engine->PreviewPolicy(body);
  if (!preview.errors.empty()) {
    return Problem(400, "Invalid policy", "the running policy stays in effect", preview.errors);
  }
  json warnings = json::array();
  for (const ConfigError& w : preview.warnings) {
    warnings.push_back({{"path", w.path}, {"warning", w.message}});
  }
  json answer = {{"dry_run", dry_run},
                 {"version_before", preview.version_before},
                 {"version", preview.version},
                 {"changes", json::parse(PolicyDiffJson(preview.changes))},
                 {"warnings", std::move(warnings)}};
  if (dry_run) return JsonResponse(200, answer);
  std::vector<ConfigError> errors = s.state->put_policy(body, actor);
  if (!errors.empty()) {
    return Problem(409, "Policy not applied", "the running policy stays in effect", errors);
  }
  answer["generation"] = s.policies->generation();
  return JsonResponse(200, answer);
}

}  // namespace tollgate::server
