#include "tollgate/key_admin.h"

#include <nlohmann/json.hpp>

#include "tollgate/json_fields.h"
#include "tollgate/log_text.h"
#include "tollgate/runtime.h"

namespace tollgate {
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
        if (ReadValue(it.value(), "keys." + ClientLogText(it.key()), &v, &errors)) {
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
      errors.push_back({"keys." + ClientLogText(spec),
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

// Names the request's key in result->key, or says why it does not.
void ResolveKey(const Policy& policy, KeyRequest& req, KeyAdminResult* result) {
  std::vector<ConfigError> errors;
  if (req.by_source_given) errors = PlaceBySource(req, SourcesOf(policy, req.rule));
  RuleKeyResult found = KeyForRule(policy, req.rule, req.values);
  if (!found.rule_found) {
    result->outcome = KeyAdminResult::Outcome::kUnknownRule;
    result->why = "unknown rule";
    return;
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
    result->outcome = KeyAdminResult::Outcome::kInvalid;
    result->errors = std::move(errors);
    result->why = "invalid request";
    return;
  }
  result->key = std::move(found.key);
}

// The action on the store: the key's state after it (get: before).
Result<Decision> Apply(const Runtime& runtime, const RuleKey& key, KeyAction action,
                       const KeyRequest& req, const Decision& before) {
  switch (action) {
    case KeyAction::kGet:
      return before;
    case KeyAction::kReset:
      if (Status st = runtime.ResetKey(key.bucket_key, key.limit); !st.ok()) return st;
      return runtime.InspectKey(key.bucket_key, key.limit);
    case KeyAction::kSet:
      return runtime.SetRemaining(key.bucket_key, key.limit, *req.remaining);
  }
  return InternalError("unknown key action");
}

void StoreFailed(const Status& st, KeyAdminResult* result) {
  result->outcome = KeyAdminResult::Outcome::kStoreFailed;
  result->status = st;
  result->why = st.ToString();
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
    if (!known) errors.push_back({ClientLogText(k), "unknown field"});
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

KeyAdminResult AdministerKey(const Runtime& runtime, KeyAction action, KeyRequest request) {
  KeyAdminResult result;
  ResolveKey(*runtime.view().policy, request, &result);
  if (!result.key) return result;
  const RuleKey& key = *result.key;
  if (action == KeyAction::kSet) {
    if (Status st = CheckRemaining(key.limit, *request.remaining); !st.ok()) {
      result.outcome = KeyAdminResult::Outcome::kInvalid;
      result.errors = {{"remaining", st.message()}};
      result.why = st.message();
      return result;
    }
  }
  Result<Decision> before = runtime.InspectKey(key.bucket_key, key.limit);
  if (!before.ok()) {
    StoreFailed(before.status(), &result);
    return result;
  }
  result.before = *before;
  if (key.block_limit) {
    // The penalty box: closed while it has no token (src/policy/enforcer_block.cc).
    Result<Decision> box = runtime.InspectKey(key.block_key, *key.block_limit);
    if (!box.ok()) {
      StoreFailed(box.status(), &result);
      return result;
    }
    result.blocked_for = box->remaining < 1 ? box->reset_after : Nanos(0);
    if (action == KeyAction::kReset) {
      if (Status st = runtime.ResetKey(key.block_key, *key.block_limit); !st.ok()) {
        StoreFailed(st, &result);
        return result;
      }
    }
  }
  Result<Decision> after = Apply(runtime, key, action, request, *before);
  if (!after.ok()) {
    StoreFailed(after.status(), &result);
    return result;
  }
  if (action != KeyAction::kGet) result.after = *after;
  return result;
}

json KeyStateJson(const Decision& d) {
  return {{"remaining", d.remaining},
          {"limit", d.limit},
          {"used", d.limit - d.remaining},
          {"reset_after_ms", d.reset_after.count() / 1'000'000}};
}

json KeyAdminAnswer(const KeyAdminResult& result, KeyAction action, std::string_view shown_key) {
  const RuleKey& key = *result.key;
  json answer = {{"rule", key.rule},
                 {"key", std::string(shown_key)},
                 {"limit_keys", key.limit_keys},
                 {"algorithm", AlgorithmName(key.limit.algorithm())},
                 {"limit", key.limit.ToString()},
                 {"before", KeyStateJson(*result.before)}};
  if (action != KeyAction::kGet && result.after) answer["after"] = KeyStateJson(*result.after);
  if (result.blocked_for) answer["blocked_ms"] = result.blocked_for->count() / 1'000'000;
  return answer;
}

}  // namespace tollgate
