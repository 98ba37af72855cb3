#include "server/status_page.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/handlers.h"
#include "server/metrics.h"
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

// The outcomes every rule's `decisions` lists, in order: the page draws
// whatever is here (a new outcome is one line of rule_counters.h).
json OutcomesJson() {
  json o = json::array();
#define TOLLGATE_STATUS_OUTCOME(field, label) o.push_back(#label);
  TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_STATUS_OUTCOME)
#undef TOLLGATE_STATUS_OUTCOME
  return o;
}

// One sample of the store's own Prometheus families (Runtime::WriteStoreMetrics:
// the store writes its metrics, so no caller holds a typed pointer to it):
// the value of the line `series` (name and labels as written), summed over
// every line of `name` with any labels when `series` is only the name
// followed by '{'. Empty when the store writes no such sample.
std::optional<double> StoreSample(std::string_view text, std::string_view series) {
  std::optional<double> total;
  const bool any_labels = series.back() == '{';
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#' || !line.starts_with(series)) continue;
    const size_t space = line.rfind(' ');
    if (space == std::string_view::npos || (!any_labels && space != series.size())) continue;
    double v = 0;
    const std::string_view number = line.substr(space + 1);
    const auto r = std::from_chars(number.data(), number.data() + number.size(), v);
    if (r.ec != std::errc()) continue;
    total = total.value_or(0) + v;
  }
  return total;
}

json Figure(const std::optional<double>& v) { return v ? json(uint64_t(*v)) : json(nullptr); }

// The decisions' latency histogram's `q` quantile as its bucket's upper
// bound, in milliseconds; null without samples or past the last bound.
json QuantileMs(const LatencyCounts& c, uint64_t total, double q) {
  if (total == 0) return nullptr;
  const auto rank = uint64_t(std::ceil(q * double(total)));
  uint64_t seen = 0;
  for (size_t i = 0; i < kDecisionLatencyBoundsNs.size(); ++i) {
    seen += c.buckets[i];
    if (seen >= rank) return double(kDecisionLatencyBoundsNs[i]) / 1e6;
  }
  return nullptr;
}

// What the store reports of itself (the samples of its /metrics families;
// null where it keeps no such figure: Redis counts its keys itself), and
// the decisions' latency (policy match + store call, the HTTP and SPOE
// front ends: tollgate_decision_duration_seconds without a label).
json StoreJson(const Runtime& s) {
  PrometheusWriter w;
  s.engine->WriteStoreMetrics(w);
  const std::string text = w.Take();
  json breaker = nullptr;
  for (const char* state : {"closed", "open", "half_open"}) {
    const std::string series = std::string("tollgate_breaker_state{state=\"") + state + "\"}";
    if (StoreSample(text, series).value_or(0) == 1) breaker = state;
  }
  LatencyCounts latency;
  for (size_t i = 0; i < s.metrics->shard_count(); ++i) {
    s.metrics->shard(i).decisions.AddTo(latency);
  }
  uint64_t total = 0;
  for (uint64_t b : latency.buckets) total += b;
  return {{"description", s.engine->store_description()},
          {"healthy", s.engine->StoreHealthy()},
          {"backing_healthy", s.engine->BackingHealthy()},
          {"failure_mode", FailureModeName(s.config->failure_mode)},
          {"breaker", breaker},
          {"keys", Figure(StoreSample(text, "tollgate_store_keys{"))},
          {"max_keys", Figure(StoreSample(text, "tollgate_store_max_keys{"))},
          {"keys_evicted", Figure(StoreSample(text, "tollgate_store_keys_evicted_total{"))},
          {"keys_evicted_in_debt",
           Figure(StoreSample(text, "tollgate_store_keys_evicted_in_debt_total{"))},
          {"overflow", Figure(StoreSample(text, "tollgate_store_overflow_total{"))},
          {"remote_errors", Figure(StoreSample(text, "tollgate_redis_errors_total{"))},
          {"calls", latency.store_calls},
          {"errors", latency.store_errors},
          {"latency",
           {{"decisions", total},
            {"mean_ms", total ? json(double(latency.sum_ns) / double(total) / 1e6) : json(nullptr)},
            {"p50_ms", QuantileMs(latency, total, 0.50)},
            {"p90_ms", QuantileMs(latency, total, 0.90)},
            {"p99_ms", QuantileMs(latency, total, 0.99)}}}};
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
            {"store", StoreJson(s)},
            {"outcomes", OutcomesJson()},
            {"rules", RulesJson(s, counters)},
            {"rollback", RollbackViewJson(*s.engine, s.clock->Now())},
            {"top", TopJson(s, raw)}};
  return JsonResponse(200, j);
}

}  // namespace tollgate::server
