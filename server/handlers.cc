#include "server/handlers.h"

#include <nlohmann/json.hpp>

#include "server/upstream_tls.h"
#include "tollgate/config_error.h"
#include "tollgate/json_fields.h"
#include "tollgate/key_admin.h"
#include "tollgate/limit.h"
#include "tollgate/period.h"
#include "tollgate/policy_headers.h"
#include "tollgate/rollback_admin.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxItems = 64;
constexpr size_t kMaxHeaders = 128;

int64_t Ms(Nanos d) {
  if (d == Decision::kNever) return -1;
  return d.count() / 1'000'000;
}

// The limit applied, or what a rule without one did (its limit is a placeholder).
std::string RuleDescription(const RuleOutcome& r) {
  if (r.action == "allow") return "allow: exempt, no limit; later rules not evaluated";
  if (r.action == "deny") return "deny: refused by the policy (403)";
  if (r.action == "unlimited") return "unlimited: no limit";
  return r.limit ? r.limit->ToString() : std::string();
}

json RuleJson(const RuleOutcome& r) {
  json j = {{"rule", r.rule},
            {"key", r.key},
            {"cost", r.cost},
            {"shadow", r.shadow},
            {"allowed", r.decision.allowed},
            {"limit", r.decision.limit},
            {"remaining", r.decision.remaining},
            {"retry_after_ms", Ms(r.decision.retry_after)},
            {"reset_after_ms", Ms(r.decision.reset_after)},
            {"action", r.action},
            {"description", RuleDescription(r)}};
  if (r.decision.delay.count() > 0) j["delay_ms"] = Ms(r.decision.delay);
  if (r.soft()) {
    j["soft"] = true;
    j["soft_exceeded"] = r.soft_exceeded();
  }
  if (r.action != "limit") {
    // No quota behind the numbers: null rather than a placeholder's.
    j["limit"] = nullptr;
    j["remaining"] = nullptr;
  }
  return j;
}

json OutcomeJson(const CheckOutcome& o) {
  json rules = json::array();
  for (const auto& r : o.rules) rules.push_back(RuleJson(r));
  json headers = json::object();
  for (const auto& h : o.headers) headers[h.name] = h.value;
  json j = {{"allowed", o.allowed()},
            {"verdict", VerdictName(o.verdict)},
            {"status", o.http_status},
            {"enforced", o.enforced},
            {"retry_after_seconds", o.retry_after_seconds},
            {"delay_ms", Ms(o.delay)},
            {"rules", std::move(rules)},
            {"headers", std::move(headers)},
            {"policy_generation", o.policy_generation}};
  j["denied_rule"] = o.denied_rule >= 0 && size_t(o.denied_rule) < o.rules.size()
                         ? json(o.rules[o.denied_rule].rule)
                         : json(nullptr);
  if (!o.status.ok()) j["error"] = o.status.ToString();
  if (!o.leases.empty()) {
    // Concurrency rules: tokens to POST to /v1/release when the work ends.
    json leases = json::array();
    for (const HeldLease& l : o.leases) {
      leases.push_back({{"rule", l.rule}, {"lease", Enforcer::LeaseToken(l)}});
    }
    j["leases"] = std::move(leases);
  }
  if (!o.allowed() && !o.body.empty()) {
    json problem = json::parse(o.body, nullptr, false);
    if (!problem.is_discarded()) j["problem"] = std::move(problem);
  }
  return j;
}

// The "request" member of a decide body (an object).
void ParseDescribedRequest(const json& r, DecideInput* out, ConfigErrors& e) {
  DescribedRequest d;
  JsonFields f(r, "request", e);
  f.String("method", &d.method);
  if (auto path = f.String("path")) {
    d.path = std::move(*path);
    if (d.path.empty() || d.path[0] != '/') f.Error("path", "must start with /");
  }
  if (auto query = f.String("query")) {
    d.query = std::move(*query);
  } else if (size_t q = d.path.find('?'); !f.Has("query") && q != std::string::npos) {
    d.query = d.path.substr(q + 1);
    d.path.resize(q);
  }
  if (auto ip = f.String("client_ip")) {
    d.client_ip = std::move(*ip);
  } else if (!f.Has("client_ip")) {
    f.String("ip", &d.client_ip);
  }
  if (const json* h = f.Find("headers")) {
    if (h->is_object()) {
      JsonFields names = f.Nested(*h, "headers");
      for (auto it = h->begin(); it != h->end(); ++it) {
        if (auto value = names.String(it.key())) d.header_storage.emplace_back(it.key(), *value);
      }
    } else if (h->is_array()) {
      for (size_t i = 0; i < h->size(); ++i) {
        const json& p = (*h)[i];
        if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string()) {
          e.Add(f.PathOf("headers") + "[" + std::to_string(i) + "]",
                "must be [\"name\", \"value\"]");
          continue;
        }
        d.header_storage.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
      }
    } else {
      f.Error("headers", "must be an object or an array of [name, value]");
    }
    if (d.header_storage.size() > kMaxHeaders) {
      f.Error("headers", "at most " + std::to_string(kMaxHeaders) + " headers");
    }
  }
  f.RejectUnknown({"method", "path", "query", "client_ip", "ip", "headers"});
  out->request = std::move(d);
}

// An item's "limit": {"count": N, "period": "1h"} or {"rps": R, "burst": B},
// with an optional "algorithm" (token_bucket by default). Bounded like a
// policy's algorithm_config; Limit::Validate has the last word.
std::optional<LimitSpec> ParseItemLimit(const json& l, const std::string& path,
                                        std::vector<ConfigError>* errors) {
  ConfigErrors e(errors);
  if (!l.is_object()) {
    e.Add(path, "must be an object {count, period} or {rps, burst} (got " + JsonTypeName(l) + ")");
    return std::nullopt;
  }
  const size_t before = e.count();
  JsonFields f(l, path, e);
  f.RejectUnknown({"algorithm", "count", "period", "rps", "burst"});
  LimitSpec spec;
  if (auto a = f.String("algorithm"); a && !ParseAlgorithm(*a, &spec.algorithm)) {
    f.Error("algorithm", "unknown algorithm (expected " + std::string(AlgorithmNameList()) + ")");
  }
  const bool window = IsWindowAlgorithm(spec.algorithm);
  if (f.Has("count") || f.Has("period")) {
    auto count = f.Whole("count", Limit::kMaxBurst);
    auto period = f.String("period");
    if (count && period) {
      auto p = ParsePeriod(*period);
      if (!p.ok()) {
        f.Error("period", p.status().message());
      } else {
        spec.burst = *count;
        if (window) {
          spec.window = *p;
        } else {
          spec.count = *count;
          spec.period = *p;
        }
      }
    } else if (e.count() == before) {
      f.Error(count ? "period" : "count", "is required: count and period go together");
    }
    if (f.Has("rps") || f.Has("burst")) {
      e.Add(path, "set count and period, or rps and burst, not both");
    }
  } else {
    auto rps = f.Number("rps");
    if (!f.Has("rps")) {
      f.Error("rps", "is required (a number > 0), or count and period");
    } else if (rps && !(*rps > 0 && *rps <= Limit::kMaxRate)) {
      f.Error("rps", "must be > 0 and at most " + NumberText(Limit::kMaxRate) + " (got " +
                         NumberText(*rps) + ")");
    } else if (rps && window) {
      f.Error("rps", "is not used by window algorithms: set count and period");
    } else if (rps) {
      spec.rate = *rps;
    }
    if (!f.Has("burst")) {
      f.Error("burst", "is required with rps");
    } else if (auto burst = f.Whole("burst", Limit::kMaxBurst)) {
      spec.burst = *burst;
    }
  }
  if (e.count() != before) return std::nullopt;
  for (const LimitError& le : Limit::Validate(spec)) {
    // Core's names for the fields this object spells differently.
    const std::string field = le.field == "rate"     ? "rps"
                              : le.field == "window" ? "period"
                                                     : le.field;
    f.Error(field, le.message);
  }
  if (e.count() != before) return std::nullopt;
  return spec;
}

// The "items" member of a decide body.
void ParseItems(const json& items, DecideInput* out, std::vector<ConfigError>* errors) {
  // These two replace any error found so far: the body is answered with them alone.
  if (!items.is_array() || items.empty()) {
    *errors = {{"items", "must be a non-empty array"}};
    return;
  }
  if (items.size() > kMaxItems) {
    *errors = {{"items", "at most " + std::to_string(kMaxItems) + " items"}};
    return;
  }
  out->item_storage.reserve(items.size() * 2);  // pointers into it must stay valid
  out->value_storage.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    std::string path = "items[" + std::to_string(i) + "]";
    const json& it = items[i];
    if (!it.is_object()) {
      errors->push_back({path, "must be an object {rule?, key | values, cost?, limit?}"});
      continue;
    }
    ConfigErrors e(errors);
    JsonFields f(it, path, e);
    f.RejectUnknown({"rule", "key", "values", "cost", "limit"});
    std::string rule, key;
    f.String("rule", &rule);
    // "key": the identity of a rule with one limit_keys source; "values": one
    // value per source, in order, for any rule (the key routes' form).
    out->value_storage.emplace_back();
    if (f.Has("key") == f.Has("values")) {
      f.Error("key",
              "exactly one of \"key\" or \"values\" (the rule's limit_keys values) is "
              "required");
    } else if (f.Has("key")) {
      f.String("key", &key);
    } else if (rule.empty()) {
      f.Error("values", "needs \"rule\" (values are a rule's limit_keys values)");
    } else {
      ParseKeyValues(*f.Find("values"), f.PathOf("values"), &out->value_storage.back(), errors);
    }
    int64_t cost = 1;
    f.Integer("cost", &cost, 0, Limit::kMaxBurst);
    std::optional<LimitSpec> limit;
    if (const json* l = f.Find("limit")) limit = ParseItemLimit(*l, f.PathOf("limit"), errors);
    out->item_storage.push_back(std::move(rule));
    const std::string& rule_ref = out->item_storage.back();
    out->item_storage.push_back(std::move(key));
    const std::string& key_ref = out->item_storage.back();
    ExplicitItem item;
    item.rule = rule_ref;
    item.key = key_ref;
    item.values = out->value_storage.back();
    item.cost = cost;
    item.limit_override = limit;
    out->has_limits = out->has_limits || limit.has_value();
    out->items.push_back(item);
  }
}

}  // namespace

Response JsonResponse(int status, const json& j) {
  Response r;
  r.status = status;
  r.content_type = kJson;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  return r;
}

RequestView DescribedRequest::View() {
  headers.clear();
  for (const auto& [n, v] : header_storage) headers.emplace_back(n, v);
  RequestView v;
  v.method = method;
  v.path = path;
  v.query = query;
  v.peer_address = client_ip;
  v.headers = std::span<const HeaderPair>(headers.data(), headers.size());
  return v;
}

// CheckItems' refusals read "items[i]: <why>", or "items[i]: <field>: <why>"
// for a field of the item (key, values, values[j], cost, limit): the problem's
// errors then name the field's path, as the body parser's do.
std::vector<ConfigError> ItemErrors(std::string_view message) {
  const size_t colon = message.find("]: ");
  if (!message.starts_with("items[") || colon == std::string_view::npos) {
    return {{"items", std::string(message)}};
  }
  std::string path(message.substr(0, colon + 1));
  std::string_view why = message.substr(colon + 3);
  for (std::string_view field : {"values", "key", "cost", "limit"}) {
    if (!why.starts_with(field)) continue;
    const size_t end = why.find(": ");
    const std::string_view name = why.substr(0, end);
    if (end == std::string_view::npos ||
        (name.size() > field.size() && name[field.size()] != '[')) {
      continue;
    }
    path += "." + std::string(name);
    why.remove_prefix(end + 2);
    break;
  }
  return {{std::move(path), std::string(why)}};
}

std::vector<ConfigError> ParseDecideBody(std::string_view body, DecideInput* out) {
  std::vector<ConfigError> errors;
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return {{"", "body is not valid JSON"}};
  if (!doc.is_object()) return {{"", "body must be a JSON object with \"request\" or \"items\""}};
  bool has_request = doc.contains("request"), has_items = doc.contains("items");
  if (has_request == has_items) {
    return {{"", "exactly one of \"request\" or \"items\" is required"}};
  }
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "request" && it.key() != "items") errors.push_back({it.key(), "unknown field"});
  }
  if (has_request) {
    const json& r = doc["request"];
    if (!r.is_object()) return {{"request", "must be an object"}};
    ConfigErrors e(&errors);
    ParseDescribedRequest(r, out, e);
    return errors;
  }
  ParseItems(doc["items"], out, &errors);
  return errors;
}

std::vector<ConfigError> ParseReleaseBody(std::string_view body, const Enforcer& enforcer,
                                          std::vector<HeldLease>* out) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return {{"", "body is not valid JSON"}};
  if (!doc.is_object()) return {{"", "body must be a JSON object with \"leases\""}};
  std::vector<ConfigError> errors;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "leases") errors.push_back({it.key(), "unknown field"});
  }
  auto leases = doc.find("leases");
  if (leases == doc.end()) return {{"leases", "is required"}};
  if (!leases->is_array() || leases->empty() || leases->size() > kMaxReleaseLeases) {
    return {{"leases", "must be an array of 1 to " + std::to_string(kMaxReleaseLeases) +
                           " lease strings (the \"lease\" of a /v1/decide answer)"}};
  }
  for (size_t i = 0; i < leases->size(); ++i) {
    const std::string path = "leases[" + std::to_string(i) + "]";
    const json& v = (*leases)[i];
    if (!v.is_string()) {
      errors.push_back({path, "must be a string"});
      continue;
    }
    Result<HeldLease> lease = enforcer.ParseLeaseToken(v.get_ref<const std::string&>());
    if (!lease.ok()) {
      errors.push_back({path, lease.status().message()});
      continue;
    }
    out->push_back(std::move(*lease));
  }
  return errors;
}

Response RenderRelease(int64_t released, int64_t not_held) {
  return JsonResponse(200, {{"released", released}, {"not_held", not_held}});
}

Response RenderDecision(const CheckOutcome& outcome) {
  Response r = JsonResponse(200, OutcomeJson(outcome));
  r.headers.reserve(outcome.headers.size());
  for (const HeaderField& h : outcome.headers) {
    // A rejection's Content-Type describes the 429 body (it stays in the JSON's
    // "headers"); this answer's body is the decision JSON, with one Content-Type.
    if (!EqualsIgnoreCase(h.name, "content-type")) r.headers.push_back(h);
  }
  return r;
}

Response RejectionResponse(const CheckOutcome& outcome) {
  Response r;
  r.status = outcome.http_status == 200 ? 429 : outcome.http_status;
  r.content_type = kProblemJson;
  r.body = outcome.body;
  bool cache_control = false;
  for (const HeaderField& h : outcome.headers) {
    if (EqualsIgnoreCase(h.name, "content-type")) continue;  // ours is set above
    cache_control = cache_control || EqualsIgnoreCase(h.name, "cache-control");
    r.headers.push_back(h);
  }
  if (!cache_control) r.headers.push_back({"Cache-Control", "no-store"});  // RFC 6585
  return r;
}

Response HandleHealthz(const Runtime& s) {
  Response r;
  r.content_type = kText;
  r.body = "ok\n";
  return r;
}

Response HandleReadyz(const Runtime& s, bool detail) {
  // Ready when the store can decide or the failure mode answers for it; the
  // store behind the failure mode is reported on its own.
  const bool can_decide = s.engine->StoreHealthy();
  const bool backing_ok = s.engine->BackingHealthy();
  bool ready = !s.state->Draining() && s.engine->Ready();
  if (!detail) {
    return JsonResponse(ready ? 200 : 503, {{"ready", ready}, {"draining", s.state->Draining()}});
  }
  const PolicyStore::ReloadResult last = s.policies->last_reload();
  json j = {{"ready", ready},
            {"policy_generation", s.policies->generation()},
            {"policy_version", s.policies->version()},
            {"policy_source", s.policy_source},
            {"policy_last_reload", {{"ok", last.ok}, {"wall_time_ns", last.wall_time_ns}}},
            {"store", s.engine->store_description()},
            {"store_healthy", backing_ok && can_decide},
            {"failure_mode", FailureModeName(s.config->failure_mode)},
            {"draining", s.state->Draining()},
            // Rules the rollback guard switched to shadow on this instance: the
            // instance still decides (ready), but enforces less than its policy.
            {"rolled_back", TrippedRulesJson(s.enforcer->Counters())}};
  return JsonResponse(ready ? 200 : 503, j);
}

// The Envoy RLS front end's decisions, in the same family: HTTP series keep
// their labels, gRPC ones add frontend="grpc" (docs/operations.md). Returns
// its decision latency for the shared histogram (nullopt without gRPC).
std::optional<ServerMetrics::LatencyCounts> WriteGrpcDecisions(PrometheusWriter& w,
                                                               const Runtime& s) {
  if (!s.grpc) return std::nullopt;
  for (const auto& c : s.grpc->DecisionCounters()) {
#define TOLLGATE_GRPC_DECISION_SAMPLE(field, label)                                             \
  w.Sample("tollgate_decisions_total", {"frontend", "grpc", "rule", c.rule, "outcome", #label}, \
           c.field);
    TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_GRPC_DECISION_SAMPLE)
#undef TOLLGATE_GRPC_DECISION_SAMPLE
  }
  return s.grpc->DecisionLatency();
}

// The store, tracing, log gates, /v1/top and the process.
void WriteProcessMetrics(PrometheusWriter& w, const Runtime& s) {
  w.Family("tollgate_store_healthy", "gauge", "1 when the store can decide.");
  w.Sample("tollgate_store_healthy", s.engine->StoreHealthy() ? 1.0 : 0.0);
  s.engine->WriteStoreMetrics(w);
  if (s.tracer) s.tracer->Render(w);
  w.Family("tollgate_rejection_logs_suppressed_total", "counter",
           "Rejections not logged because of sampling or the per-second cap.");
  w.Sample("tollgate_rejection_logs_suppressed_total", {}, s.reject_gate->suppressed());
  w.Family("tollgate_shadow_logs_suppressed_total", "counter",
           "Shadow rejections not logged because of sampling or the per-second cap.");
  w.Sample("tollgate_shadow_logs_suppressed_total", {}, s.shadow_gate->suppressed());
  w.Family("tollgate_top_dropped_total", "counter",
           "Rejections not tracked by /v1/top because too many rules were seen.");
  w.Sample("tollgate_top_dropped_total", {}, s.top->dropped());
  w.Family("tollgate_start_time_seconds", "gauge", "Process start, Unix seconds.");
  w.Sample("tollgate_start_time_seconds", double(s.start_wall_ns / 1'000'000'000));
  w.Family("tollgate_draining", "gauge", "1 while shutting down.");
  w.Sample("tollgate_draining", s.state->Draining() ? 1.0 : 0.0);
}

Response HandleMetrics(const Runtime& s) {
  PrometheusWriter w;
  const std::vector<RuleCounters> counters = s.enforcer->Counters();
  WriteRuleDecisionMetrics(w, counters);
  const std::optional<ServerMetrics::LatencyCounts> grpc_latency = WriteGrpcDecisions(w, s);
  WriteRuleGuardMetrics(w, counters);
  s.engine->WriteFleetMetrics(w);
  WriteRuleSettlementMetrics(w, counters);
  s.metrics->Render(w, grpc_latency ? &*grpc_latency : nullptr);
  UpstreamTls::Render(w, s.gateway ? s.gateway->tls.get() : nullptr);
  s.engine->WritePolicyMetrics(w);
  WriteProcessMetrics(w, s);
  Response r;
  r.content_type = kPrometheus;
  r.body = w.Take();
  if (s.grpc) s.grpc->AppendMetrics(&r.body);
  return r;
}

Response HandleReload(const Runtime& s) {
  std::vector<ConfigError> errors = s.state->reload("admin");
  if (!errors.empty()) {
    return Problem(400, "Policy reload failed", "the previous policy stays in effect", errors);
  }
  return JsonResponse(200, {{"ok", true}, {"generation", s.policies->generation()}});
}

Response HandleTop(const Runtime& s, std::string_view query, bool may_show_raw) {
  size_t n = 10;
  std::string rule_filter;
  std::vector<ConfigError> errors;
  ForEachQueryParam(query, [&](std::string_view name, std::string_view value) {
    if (name == "n") {
      const std::string digits(value);
      char* end = nullptr;
      long v = std::strtol(digits.c_str(), &end, 10);
      if (digits.empty() || *end != '\0' || v < 1 || v > 1000) {
        errors.push_back({"n", "must be an integer in [1, 1000]"});
      } else {
        n = size_t(v);
      }
    } else if (name == "rule") {
      rule_filter = value;
    } else if (name != "raw") {
      errors.push_back({std::string(name), "unknown parameter (n, rule, raw)"});
    }
  });
  if (!errors.empty()) return Problem(400, "Bad query", "", errors);
  const bool raw = RawRequested(query);
  if (raw && !may_show_raw) return RawNeedsToken();
  json rules = json::array();
  for (auto& rt : s.top->Top(n, s.clock->Now())) {
    if (!rule_filter.empty() && rt.rule != rule_filter) continue;
    json top = json::array();
    for (const auto& e : rt.top) {
      top.push_back(
          {{"key", s.identities.Show(e.key, raw)}, {"rejected", e.count}, {"error", e.error}});
    }
    rules.push_back({{"rule", rt.rule}, {"top", std::move(top)}});
  }
  return JsonResponse(200, {{"window_seconds", s.config->top_window.count() / 1000},
                            {"note",
                             "counts cover the current and the previous window; a count "
                             "overestimates the truth by at most its error"},
                            {"rules", std::move(rules)}});
}

std::vector<ConfigError> ParseExplainQuery(std::string_view query, DescribedRequest* out) {
  std::vector<ConfigError> errors;
  ForEachQueryParam(query, [&](std::string_view name, std::string_view value) {
    if (name == "method") {
      out->method = value;
    } else if (name == "path") {
      size_t q = value.find('?');
      if (q != std::string_view::npos) {
        out->query = value.substr(q + 1);
        value = value.substr(0, q);
      }
      out->path = value;
    } else if (name == "query") {
      out->query = value;
    } else if (name == "ip" || name == "client_ip") {
      out->client_ip = value;
    } else if (name == "header") {
      size_t colon = value.find(':');
      if (colon == std::string_view::npos || colon == 0) {
        errors.push_back({"header", "must be name:value"});
        return;
      }
      std::string_view v = value.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      out->header_storage.emplace_back(value.substr(0, colon), v);
    } else if (name != "raw") {
      errors.push_back(
          {std::string(name), "unknown parameter (method, path, query, header, ip, raw)"});
    }
  });
  if (out->path.empty() || out->path[0] != '/') errors.push_back({"path", "must start with /"});
  if (out->header_storage.size() > kMaxHeaders) errors.push_back({"header", "too many"});
  return errors;
}

bool RawRequested(std::string_view query) {
  bool raw = false;
  ForEachQueryParam(query, [&](std::string_view name, std::string_view value) {
    if (name == "raw") raw = value == "1" || value == "true";
  });
  return raw;
}

Response RawNeedsToken() {
  return Problem(403, "Raw identities need a write-scoped admin token",
                 "raw=1 is honoured only for a request with a token of scope write "
                 "(admin.token_file, admin.tokens); or set identities.raw in the config");
}

Response RenderExplain(const CheckOutcome& outcome, const DescribedRequest& request,
                       std::string_view client_ip, const IdentityRedactor& ids, bool raw) {
  json j = OutcomeJson(outcome);
  const bool show_raw = raw || ids.raw();
  std::vector<std::string> trace = outcome.trace;
  if (!show_raw) {
    // The trace names each applied rule's key ("applies, key <identity>, ...").
    for (size_t i = 0; i < outcome.rules.size(); ++i) {
      const std::string& key = outcome.rules[i].key;
      j["rules"][i]["key"] = ids.Hash(key);
      if (key.empty()) continue;
      const std::string hashed = ids.Hash(key);
      for (std::string& line : trace) {
        const std::string marker = "key " + key + ",";
        for (size_t at = line.find(marker); at != std::string::npos;
             at = line.find(marker, at + 4 + hashed.size())) {
          line.replace(at + 4, key.size(), hashed);
        }
      }
    }
  }
  j["trace"] = trace;
  json headers = json::object();
  for (const auto& [n, v] : request.header_storage) headers[n] = ids.Show(v, raw);
  j["request"] = {{"method", request.method},
                  {"path", request.path},
                  {"query", request.query},
                  {"peer", ids.Show(request.client_ip, raw)},
                  {"client_ip", ids.Show(client_ip, raw)},
                  {"headers", std::move(headers)}};
  j["note"] = "explain charges nothing: remaining shows each bucket's state now";
  if (!show_raw) {
    j["identities"] =
        "keys, addresses and header values are shown as hmac:<HMAC-SHA256 prefix>; "
        "raw=1 (with the admin token) shows them";
  }
  return JsonResponse(200, j);
}

void LogShadowRejection(const Runtime& s, const RuleOutcome& r, int64_t now,
                        const RequestView* request, std::string_view trace_id) {
  if (!s.shadow_gate->Admit(now / 1'000'000'000)) return;
  static constexpr const char* kWhy[] = {"enforced", "configured", "rollout", "rollback", "soft"};
  const EnforcerOptions& eo = s.enforcer->options();
  json f = json::object();
  f["rule"] = r.rule;
  f["shadow"] = kWhy[static_cast<size_t>(r.shadow_reason)];
  f["key"] = s.identities.ShowInLog(r.key);
  f["limit"] = r.limit ? r.limit->ToString() : std::string();
  f["cost"] = r.cost;
  f["remaining"] = r.decision.remaining;
  // What a 429 would have said: the same jittered Retry-After; -1 = never fits.
  f["would_retry_after_s"] =
      RetryAfterSeconds(r.decision.retry_after, r.key, eo.retry_after_jitter, eo.jitter_seed);
  if (request) {
    f["method"] = Logger::Client(request->method);
    f["path"] = Logger::Client(request->path);
    f["peer"] = s.identities.ShowInLog(request->peer_address);
  }
  if (!trace_id.empty()) f["trace_id"] = std::string(trace_id);
  f["suppressed_before"] = s.shadow_gate->TakeSuppressed();
  // A soft rule's line is the shadow line under its own event: the request was admitted and told.
  s.log->Info(r.soft() ? "soft_exceeded" : "shadow_rejected", std::move(f));
}

void RecordOutcome(const Runtime& s, ServerMetrics::Shard& shard, const CheckOutcome& outcome,
                   int64_t elapsed_ns, const RequestView* request, std::string_view trace_id) {
  if (outcome.rules.empty() && outcome.status.ok()) return;  // nothing applied: no store call
  shard.ObserveDecision(elapsed_ns, !outcome.enforced || !outcome.status.ok());
  if (outcome.delay.count() > 0) shard.shaped.fetch_add(1, std::memory_order_relaxed);
  if (outcome.verdict != CheckOutcome::Verdict::kReject && outcome.status.ok()) {
    bool shadow_denied = false;
    for (const auto& r : outcome.rules) shadow_denied = shadow_denied || !r.decision.allowed;
    if (!shadow_denied) return;  // the hot path: allowed, nothing to track
  }
  int64_t now = s.clock->Now();
  for (const auto& r : outcome.rules) {
    if (r.decision.allowed || r.cost <= 0) continue;
    s.top->Record(r.rule, r.key, now);
    if (r.shadow && outcome.status.ok()) LogShadowRejection(s, r, now, request, trace_id);
  }
  if (outcome.allowed()) return;
  if (!s.reject_gate->Admit(now / 1'000'000'000)) return;
  json f = json::object();
  f["status"] = outcome.http_status;
  if (outcome.denied_rule >= 0 && size_t(outcome.denied_rule) < outcome.rules.size()) {
    const RuleOutcome& r = outcome.rules[outcome.denied_rule];
    f["rule"] = r.rule;
    f["key"] = s.identities.ShowInLog(r.key);
    f["retry_after_s"] = outcome.retry_after_seconds;
  }
  if (!outcome.status.ok()) f["error"] = outcome.status.ToString();
  if (request) {
    f["method"] = Logger::Client(request->method);
    f["path"] = Logger::Client(request->path);
    f["peer"] = s.identities.ShowInLog(request->peer_address);
  }
  if (!trace_id.empty()) f["trace_id"] = std::string(trace_id);
  f["sampled"] = true;
  s.log->Info(outcome.verdict == CheckOutcome::Verdict::kReject ? "rejected" : "unavailable",
              std::move(f));
}

}  // namespace tollgate::server
