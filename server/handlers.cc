#include "server/handlers.h"

#include <nlohmann/json.hpp>

#include "tollgate/limit.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxItems = 64;
constexpr size_t kMaxHeaders = 128;

int64_t Ms(Nanos d) {
  if (d == Decision::kNever) return -1;
  return d.count() / 1'000'000;
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
            {"description", r.limit ? r.limit->ToString() : std::string()}};
  if (r.decision.delay.count() > 0) j["delay_ms"] = Ms(r.decision.delay);
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

bool ReadString(const json& obj, const char* field, const std::string& path, std::string* out,
                std::vector<ConfigError>* errors) {
  auto it = obj.find(field);
  if (it == obj.end()) return false;
  if (!it->is_string()) {
    errors->push_back({path + "." + field, "must be a string"});
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

// The "request" member of a decide body (an object).
void ParseDescribedRequest(const json& r, DecideInput* out, std::vector<ConfigError>* errors) {
  DescribedRequest d;
  ReadString(r, "method", "request", &d.method, errors);
  if (ReadString(r, "path", "request", &d.path, errors)) {
    if (d.path.empty() || d.path[0] != '/')
      errors->push_back({"request.path", "must start with /"});
  }
  ReadString(r, "query", "request", &d.query, errors);
  if (!r.contains("query")) {
    size_t q = d.path.find('?');
    if (q != std::string::npos) {
      d.query = d.path.substr(q + 1);
      d.path.resize(q);
    }
  }
  if (!ReadString(r, "client_ip", "request", &d.client_ip, errors)) {
    ReadString(r, "ip", "request", &d.client_ip, errors);
  }
  if (auto h = r.find("headers"); h != r.end()) {
    if (h->is_object()) {
      for (auto f = h->begin(); f != h->end(); ++f) {
        if (!f.value().is_string()) {
          errors->push_back({"request.headers." + f.key(), "must be a string"});
          continue;
        }
        d.header_storage.emplace_back(f.key(), f.value().get<std::string>());
      }
    } else if (h->is_array()) {
      for (size_t i = 0; i < h->size(); ++i) {
        const json& p = (*h)[i];
        if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string()) {
          errors->push_back(
              {"request.headers[" + std::to_string(i) + "]", "must be [\"name\", \"value\"]"});
          continue;
        }
        d.header_storage.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
      }
    } else {
      errors->push_back({"request.headers", "must be an object or an array of [name, value]"});
    }
    if (d.header_storage.size() > kMaxHeaders) {
      errors->push_back({"request.headers", "at most " + std::to_string(kMaxHeaders) + " headers"});
    }
  }
  for (auto it = r.begin(); it != r.end(); ++it) {
    static const char* kKnown[] = {"method", "path", "query", "client_ip", "ip", "headers"};
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known) errors->push_back({"request." + it.key(), "unknown field"});
  }
  out->request = std::move(d);
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
  for (size_t i = 0; i < items.size(); ++i) {
    std::string path = "items[" + std::to_string(i) + "]";
    const json& it = items[i];
    if (!it.is_object()) {
      errors->push_back({path, "must be an object {rule?, key, cost?}"});
      continue;
    }
    std::string rule, key;
    ReadString(it, "rule", path, &rule, errors);
    if (!ReadString(it, "key", path, &key, errors) && !it.contains("key")) {
      errors->push_back({path + ".key", "is required"});
    }
    int64_t cost = 1;
    if (auto c = it.find("cost"); c != it.end()) {
      if (!c->is_number_integer() || c->get<int64_t>() < 0 ||
          (c->is_number_unsigned() && c->get<uint64_t>() > uint64_t(Limit::kMaxBurst))) {
        errors->push_back({path + ".cost", "must be an integer >= 0"});
      } else {
        cost = c->get<int64_t>();
      }
    }
    for (auto f = it.begin(); f != it.end(); ++f) {
      if (f.key() != "rule" && f.key() != "key" && f.key() != "cost") {
        errors->push_back({path + "." + f.key(), "unknown field"});
      }
    }
    out->item_storage.push_back(std::move(rule));
    const std::string& rule_ref = out->item_storage.back();
    out->item_storage.push_back(std::move(key));
    const std::string& key_ref = out->item_storage.back();
    ExplicitItem item;
    item.rule = rule_ref;
    item.key = key_ref;
    item.cost = cost;
    out->items.push_back(item);
  }
}

}  // namespace

std::string Dump(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  s.push_back('\n');
  return s;
}

Response JsonResponse(int status, const json& j) {
  Response r;
  r.status = status;
  r.content_type = kJson;
  r.body = Dump(j);
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
    ParseDescribedRequest(r, out, &errors);
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

Response HandleReadyz(const Runtime& s) {
  // Ready when the store can decide or the failure mode answers for it; the
  // store behind the failure mode is reported on its own.
  const bool can_decide = s.store->store->Healthy();
  const bool backing_ok = s.store->backing_healthy ? s.store->backing_healthy() : can_decide;
  bool ready = !s.state->Draining() && (can_decide || !s.store->fail_closed);
  const PolicyStore::ReloadResult last = s.policies->last_reload();
  json j = {{"ready", ready},
            {"policy_generation", s.policies->generation()},
            {"policy_version", s.policies->version()},
            {"policy_source", s.policy_source},
            {"policy_last_reload", {{"ok", last.ok}, {"wall_time_ns", last.wall_time_ns}}},
            {"store", s.store->description},
            {"store_healthy", backing_ok && can_decide},
            {"failure_mode", s.config->failure_mode},
            {"draining", s.state->Draining()}};
  return JsonResponse(ready ? 200 : 503, j);
}

Response HandleMetrics(const Runtime& s) {
  PrometheusWriter w;
  w.Family("tollgate_decisions_total", "counter",
           "Rule decisions by rule and outcome (allowed, rejected, shadow_rejected, unenforced, "
           "unavailable).");
  std::vector<RuleCounters> counters = s.enforcer->Counters();
  for (const auto& c : counters) {
    w.Sample("tollgate_decisions_total", {"rule", c.rule, "outcome", "allowed"}, c.allowed);
    w.Sample("tollgate_decisions_total", {"rule", c.rule, "outcome", "rejected"}, c.rejected);
    w.Sample("tollgate_decisions_total", {"rule", c.rule, "outcome", "shadow_rejected"},
             c.shadow_rejected);
    w.Sample("tollgate_decisions_total", {"rule", c.rule, "outcome", "unenforced"}, c.unenforced);
    w.Sample("tollgate_decisions_total", {"rule", c.rule, "outcome", "unavailable"}, c.unavailable);
  }
  // Concurrency rules only (a rule that never took a lease has no series).
  w.Family("tollgate_leases_total", "counter",
           "Concurrency leases by rule: acquired, released (while live), expired (released "
           "after expiry, twice, or unknown).");
  for (const auto& c : counters) {
    if (c.leases_acquired == 0) continue;
    w.Sample("tollgate_leases_total", {"rule", c.rule, "outcome", "acquired"}, c.leases_acquired);
    w.Sample("tollgate_leases_total", {"rule", c.rule, "outcome", "released"}, c.leases_released);
    w.Sample("tollgate_leases_total", {"rule", c.rule, "outcome", "expired"}, c.leases_expired);
  }
  w.Family("tollgate_leases_in_flight", "gauge",
           "Concurrency leases this process took and has not given back (acquired - released "
           "- expired); leases handed to /v1/auth, /v1/decide and RLS callers count until "
           "released.");
  for (const auto& c : counters) {
    if (c.leases_acquired == 0) continue;
    const uint64_t back = c.leases_released + c.leases_expired;
    w.Sample("tollgate_leases_in_flight", {"rule", c.rule},
             c.leases_acquired > back ? c.leases_acquired - back : 0);
  }
  // The Envoy RLS front end's decisions, in the same family: HTTP series keep
  // their labels, gRPC ones add frontend="grpc" (docs/operations.md).
  std::optional<ServerMetrics::LatencyCounts> grpc_latency;
  if (s.grpc) {
    static constexpr std::string_view kOutcomes[] = {"allowed", "rejected", "shadow_rejected",
                                                     "unenforced", "unavailable"};
    for (const auto& c : s.grpc->DecisionCounters()) {
      const uint64_t values[] = {c.allowed, c.rejected, c.shadow_rejected, c.unenforced,
                                 c.unavailable};
      for (size_t i = 0; i < std::size(kOutcomes); ++i) {
        w.Sample("tollgate_decisions_total",
                 {"frontend", "grpc", "rule", c.rule, "outcome", kOutcomes[i]}, values[i]);
      }
    }
    grpc_latency = s.grpc->DecisionLatency();
  }
  w.Family("tollgate_missing_key_total", "counter",
           "Decisions where a rule's key source was absent, by rule.");
  for (const auto& c : counters)
    w.Sample("tollgate_missing_key_total", {"rule", c.rule}, c.missing_key);
  w.Family("tollgate_rule_rolled_back", "gauge",
           "1 when the rollback guard switched the rule to shadow mode.");
  for (const auto& c : counters) {
    w.Sample("tollgate_rule_rolled_back", {"rule", c.rule}, c.rolled_back ? 1.0 : 0.0);
  }
  s.metrics->Render(w, grpc_latency ? &*grpc_latency : nullptr);
  w.Family("tollgate_policy_reloads_total", "counter", "Policy reloads by result.");
  w.Sample("tollgate_policy_reloads_total", {"result", "success"},
           s.state->reloads_ok.load(std::memory_order_relaxed));
  w.Sample("tollgate_policy_reloads_total", {"result", "failure"},
           s.state->reloads_failed.load(std::memory_order_relaxed));
  w.Family("tollgate_policy_generation", "gauge",
           "Generation of the live policy (1 = as started).");
  w.Sample("tollgate_policy_generation", double(s.policies->generation()));
  PolicyStore::ReloadResult last = s.policies->last_reload();
  w.Family("tollgate_policy_last_reload_success", "gauge",
           "1 if the last reload attempt succeeded (or none was made).");
  w.Sample("tollgate_policy_last_reload_success", last.ok ? 1.0 : 0.0);
  w.Family("tollgate_policy_last_reload_timestamp_seconds", "gauge",
           "Wall-clock time of the last reload attempt (or of loading at startup).");
  w.Sample("tollgate_policy_last_reload_timestamp_seconds", double(last.wall_time_ns) / 1e9);
  w.Family("tollgate_policy_info", "gauge",
           "1, labelled with the running policy's version (sha256 prefix of its text) and source.");
  w.Sample("tollgate_policy_info", {"version", s.policies->version(), "source", s.policy_source},
           1.0);
  w.Family("tollgate_store_healthy", "gauge", "1 when the store can decide.");
  w.Sample("tollgate_store_healthy", s.store->store->Healthy() ? 1.0 : 0.0);
  if (s.store->export_metrics) s.store->export_metrics(w);
  if (s.tracer) s.tracer->Render(w);
  w.Family("tollgate_rejection_logs_suppressed_total", "counter",
           "Rejections not logged because of sampling or the per-second cap.");
  w.Sample("tollgate_rejection_logs_suppressed_total", {}, s.reject_gate->suppressed());
  w.Family("tollgate_top_dropped_total", "counter",
           "Rejections not tracked by /v1/top because too many rules were seen.");
  w.Sample("tollgate_top_dropped_total", {}, s.top->dropped());
  w.Family("tollgate_start_time_seconds", "gauge", "Process start, Unix seconds.");
  w.Sample("tollgate_start_time_seconds", double(s.start_wall_ns / 1'000'000'000));
  w.Family("tollgate_draining", "gauge", "1 while shutting down.");
  w.Sample("tollgate_draining", s.state->Draining() ? 1.0 : 0.0);
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

Response HandleTop(const Runtime& s, std::string_view query) {
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
  if (raw && s.bearer.empty() && !s.identities.raw()) return RawNeedsToken();
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
  return Problem(403, "Raw identities need the admin token",
                 "raw=1 is honoured only when the admin listener has a token "
                 "(admin.token_file); or set identities.raw in the config");
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
    if (!r.decision.allowed && r.cost > 0) s.top->Record(r.rule, r.key, now);
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
