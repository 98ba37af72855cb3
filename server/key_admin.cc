#include "server/key_admin.h"

#include <nlohmann/json.hpp>
#include <variant>

#include "server/handlers.h"
#include "tollgate/config_error.h"
#include "tollgate/json_fields.h"

namespace tollgate::server {
namespace {

using json = nlohmann::json;

constexpr int kMaxBodyDepth = 4;
constexpr size_t kMaxRuleNameBytes = 256;

// A value of "values" or "keys": a bounded string, or null (the source was absent).
bool ReadValue(const json& v, const std::string& path, std::optional<std::string>* out,
               std::vector<ConfigError>* errors) {
  if (v.is_null()) {
    *out = std::nullopt;
    return true;
  }
  if (!v.is_string()) {
    errors->push_back({path, "must be a string or null"});
    return false;
  }
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() > kMaxKeyValueBytes) {
    errors->push_back({path, "longer than " + std::to_string(kMaxKeyValueBytes) + " bytes"});
    return false;
  }
  *out = s;
  return true;
}

// A key's state as the admin API and the audit log show it. `used` is what
// the key has taken of its limit: tokens (buckets) or the window's count
// (weighted by the previous window for sliding_window).
json StateJson(const Decision& d) {
  return {{"remaining", d.remaining},
          {"limit", d.limit},
          {"used", d.limit - d.remaining},
          {"reset_after_ms", d.reset_after.count() / 1'000'000}};
}

int HttpStatusOf(const Status& st) { return st.code() == StatusCode::kInvalidArgument ? 400 : 503; }

// Logs and counts one action; `fields` carries what is known of it.
void Audit(const Runtime& rt, KeyAction action, bool ok, json fields) {
  if (rt.metrics != nullptr) {
    rt.metrics->key_actions[size_t(action)][ok ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
  }
  fields["action"] = KeyActionName(action);
  fields["result"] = ok ? "ok" : "error";
  if (rt.log != nullptr) rt.log->Info("key_admin", std::move(fields));
}

// Puts "keys" (values by source) in the rule's limit_keys order.
std::vector<ConfigError> PlaceBySource(KeyRequest& req, const std::vector<std::string>& sources) {
  std::vector<ConfigError> errors;
  req.values.assign(sources.size(), std::nullopt);
  std::vector<bool> given(sources.size(), false);
  for (auto& [spec, value] : req.by_source) {
    size_t i = 0;
    while (i < sources.size() && sources[i] != spec) ++i;
    if (i == sources.size()) {
      std::string known;
      for (const auto& s : sources) known += (known.empty() ? "" : ", ") + s;
      errors.push_back({"keys." + Logger::Client(spec),
                        "rule '" + req.rule + "' does not key on it (it keys on " + known + ")"});
      continue;
    }
    req.values[i] = std::move(value);
    given[i] = true;
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    if (!given[i]) {
      errors.push_back({"keys", "needs a value for " + sources[i] + " (null: the source absent)"});
    }
  }
  return errors;
}

// The rule's limit_keys, for PlaceBySource; empty when the rule is unknown.
std::vector<std::string> SourcesOf(const Policy& policy, std::string_view rule) {
  for (const RuleSummary& r : SummarizePolicy(policy)) {
    if (r.name == rule) return r.limit_keys;
  }
  return {};
}

// The rule's key the request names, or the problem that answers it.
std::variant<RuleKey, Response> ResolveKey(const Runtime& rt, KeyRequest& req, std::string* why) {
  std::shared_ptr<const Policy> policy = rt.policies->Current();
  std::vector<ConfigError> errors;
  if (req.by_source_given) errors = PlaceBySource(req, SourcesOf(*policy, req.rule));
  RuleKeyResult found = KeyForRule(*policy, req.rule, req.values);
  if (!found.rule_found) {
    *why = "unknown rule";
    return Problem(404, "No such rule",
                   "the running policy has no rule named '" + Logger::Client(req.rule) + "'");
  }
  if (!found.status.ok()) {
    // KeyForRule's messages are "<field>: <why>" (values, values[i], rule).
    const std::string& m = found.status.message();
    const size_t colon = m.find(": ");
    errors.push_back(colon == std::string::npos
                         ? ConfigError{"values", m}
                         : ConfigError{m.substr(0, colon), m.substr(colon + 2)});
  }
  if (!errors.empty()) {
    *why = "invalid request";
    return Problem(400, "Invalid key request", "see errors", errors);
  }
  return std::move(*found.key);
}

// The action on the store: the key's state after it (get: before).
Result<Decision> Apply(const tollgate::Runtime& engine, const RuleKey& key, KeyAction action,
                       const KeyRequest& req, const Decision& before) {
  switch (action) {
    case KeyAction::kGet:
      return before;
    case KeyAction::kReset:
      if (Status st = engine.ResetKey(key.bucket_key, key.limit); !st.ok()) return st;
      return engine.InspectKey(key.bucket_key, key.limit);
    case KeyAction::kSet:
      return engine.SetRemaining(key.bucket_key, key.limit, *req.remaining);
  }
  return InternalError("unknown key action");
}

Response KeyAdmin(const Request& request, const Runtime& rt, KeyAction action) {
  const AdminToken* caller = CallerToken(request.view, rt);
  json audit = {{"actor", std::string(request.view.peer_address)},
                {"token", caller ? json(caller->name) : json(nullptr)}};
  // Every refusal and failure is logged and counted like a success.
  auto fail = [&](Response r, const std::string& why) {
    audit["error"] = why;
    Audit(rt, action, false, std::move(audit));
    return r;
  };
  KeyRequest req;
  std::vector<ConfigError> errors = ParseKeyRequest(request.body, action, &req);
  if (!req.rule.empty()) audit["rule"] = Logger::Client(req.rule);
  if (!errors.empty()) {
    return fail(Problem(400, "Invalid key request", "see errors", errors), "invalid request");
  }
  if (req.raw && !MayShowRaw(request.view, rt)) {
    return fail(RawNeedsToken(), "raw without a write-scoped token");
  }
  std::string why;
  std::variant<RuleKey, Response> resolved = ResolveKey(rt, req, &why);
  if (Response* problem = std::get_if<Response>(&resolved)) return fail(std::move(*problem), why);
  const RuleKey& key = std::get<RuleKey>(resolved);
  audit["key"] = rt.identities.ShowInLog(key.identity);
  if (action == KeyAction::kSet) {
    if (Status st = CheckRemaining(key.limit, *req.remaining); !st.ok()) {
      return fail(Problem(400, "Invalid key request", "see errors", {{"remaining", st.message()}}),
                  st.message());
    }
  }
  const tollgate::Runtime& engine = *rt.engine;
  Result<Decision> before = engine.InspectKey(key.bucket_key, key.limit);
  if (!before.ok()) {
    return fail(Problem(HttpStatusOf(before.status()), "Store failed", before.status().ToString()),
                before.status().ToString());
  }
  json answer = {{"rule", key.rule},
                 {"key", rt.identities.Show(key.identity, req.raw)},
                 {"limit_keys", key.limit_keys},
                 {"algorithm", AlgorithmName(key.limit.algorithm())},
                 {"limit", key.limit.ToString()},
                 {"before", StateJson(*before)}};
  audit["before"] = answer["before"];
  Result<Decision> after = Apply(engine, key, action, req, *before);
  if (!after.ok()) {
    return fail(Problem(HttpStatusOf(after.status()), "Store failed", after.status().ToString()),
                after.status().ToString());
  }
  if (action != KeyAction::kGet) {
    answer["after"] = StateJson(*after);
    audit["after"] = answer["after"];
  }
  Audit(rt, action, true, std::move(audit));
  return JsonResponse(200, answer);
}

}  // namespace

bool ParseKeyValues(const json& values, const std::string& path,
                    std::vector<std::optional<std::string>>* out,
                    std::vector<ConfigError>* errors) {
  if (!values.is_array() || values.empty() || values.size() > kMaxKeyValues) {
    errors->push_back(
        {path, "must be an array of 1 to " + std::to_string(kMaxKeyValues) + " strings or nulls"});
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < values.size(); ++i) {
    std::optional<std::string> v;
    if (ReadValue(values[i], IndexPath(path, i), &v, errors)) {
      out->push_back(std::move(v));
    } else {
      ok = false;
    }
  }
  return ok;
}

namespace {

// "values" (in limit_keys order) or "keys" (by source): exactly one.
void ParseKey(const json& doc, KeyRequest* out, std::vector<ConfigError>* errors_out) {
  std::vector<ConfigError>& errors = *errors_out;
  auto values = doc.find("values");
  auto keys = doc.find("keys");
  if ((values == doc.end()) == (keys == doc.end())) {
    errors.push_back({"values",
                      "exactly one of \"values\" (in limit_keys order) or \"keys\" "
                      "(by source) is required"});
  } else if (values != doc.end()) {
    ParseKeyValues(*values, "values", &out->values, &errors);
  } else {
    out->by_source_given = true;
    if (!keys->is_object() || keys->empty() || keys->size() > kMaxKeyValues) {
      errors.push_back({"keys", "must be an object of 1 to " + std::to_string(kMaxKeyValues) +
                                    " sources (\"header:x-api-key\": \"k1\")"});
    } else {
      for (auto it = keys->begin(); it != keys->end(); ++it) {
        std::optional<std::string> v;
        if (ReadValue(it.value(), "keys." + Logger::Client(it.key()), &v, &errors)) {
          out->by_source.emplace_back(it.key(), std::move(v));
        }
      }
    }
  }
}

// "remaining" (set): a whole number; its range is the rule's (CheckRemaining).
void ParseRemaining(const json& doc, KeyRequest* out, std::vector<ConfigError>* errors_out) {
  std::vector<ConfigError>& errors = *errors_out;
  auto remaining = doc.find("remaining");
  if (remaining == doc.end()) {
    errors.push_back({"remaining", "is required (whole tokens to leave, 0..burst)"});
  } else if (remaining->is_number_integer()) {
    // An unsigned value above INT64_MAX is out of every range anyway.
    out->remaining =
        remaining->is_number_unsigned() && remaining->get<uint64_t>() > uint64_t(INT64_MAX)
            ? INT64_MAX
            : remaining->get<int64_t>();
  } else {
    errors.push_back(
        {"remaining", "must be a whole number (got " + std::string(remaining->type_name()) + ")"});
  }
}

}  // namespace

std::string_view KeyActionName(KeyAction action) {
  switch (action) {
    case KeyAction::kGet:
      return "get";
    case KeyAction::kReset:
      return "reset";
    case KeyAction::kSet:
      return "set";
  }
  return "?";
}

std::vector<ConfigError> ParseKeyRequest(std::string_view body, KeyAction action, KeyRequest* out) {
  if (JsonNestingDepth(body) > kMaxBodyDepth) {
    return {{"", "body nests deeper than " + std::to_string(kMaxBodyDepth) + " levels"}};
  }
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return {{"", "body is not valid JSON"}};
  if (!doc.is_object()) return {{"", "body must be a JSON object with \"rule\" and \"values\""}};
  std::vector<ConfigError> errors;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    const bool known = k == "rule" || k == "values" || k == "keys" || k == "raw" ||
                       (k == "remaining" && action == KeyAction::kSet);
    if (!known) errors.push_back({Logger::Client(k), "unknown field"});
  }
  auto rule = doc.find("rule");
  if (rule == doc.end()) {
    errors.push_back({"rule", "is required"});
  } else if (!rule->is_string() || rule->get_ref<const std::string&>().empty()) {
    errors.push_back({"rule", "must be a non-empty string"});
  } else if (rule->get_ref<const std::string&>().size() > kMaxRuleNameBytes) {
    errors.push_back({"rule", "longer than " + std::to_string(kMaxRuleNameBytes) + " bytes"});
  } else {
    out->rule = rule->get<std::string>();
  }
  ParseKey(doc, out, &errors);
  if (action == KeyAction::kSet) ParseRemaining(doc, out, &errors);
  if (auto raw = doc.find("raw"); raw != doc.end()) {
    if (!raw->is_boolean()) {
      errors.push_back({"raw", "must be true or false"});
    } else {
      out->raw = raw->get<bool>();
    }
  }
  return errors;
}

// The store calls wait on the admin executor, never on the worker.
boost::asio::awaitable<Response> KeyGet(const Request& request, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->admin_executor,
                               [&] { return KeyAdmin(request, rt, KeyAction::kGet); });
}
boost::asio::awaitable<Response> KeyReset(const Request& request, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->admin_executor,
                               [&] { return KeyAdmin(request, rt, KeyAction::kReset); });
}
boost::asio::awaitable<Response> KeySet(const Request& request, const Runtime& rt) {
  co_return co_await OffWorker(rt.state->admin_executor,
                               [&] { return KeyAdmin(request, rt, KeyAction::kSet); });
}

}  // namespace tollgate::server
