// The policy side of the request field sources (policy/request_fields.h):
// the "template" match operator, the link from path_param:<name> to the
// rule's template, and whether a rule reads the body.
#include <memory>
#include <string>

#include "base/config_errors.h"
#include "policy/policy_impl.h"
#include "policy/request_fields.h"
#include "tollgate/json_fields.h"

namespace tollgate {
namespace {

// Every leaf condition's source under `c` (any / all / not included).
template <class Fn>
void ForEachConditionSource(std::vector<Condition>& conditions, const Fn& fn) {
  for (Condition& c : conditions) {
    if (c.children.empty()) {
      fn(c.source);
    } else {
      ForEachConditionSource(c.children, fn);
    }
  }
}

// The templates at the top of a rule's match (all of them must hold): a
// top-level condition, or one inside a top-level all-of.
void TopTemplates(const std::vector<Condition>& conditions,
                  std::vector<std::shared_ptr<const PathTemplate>>* out) {
  for (const Condition& c : conditions) {
    if (c.op == Condition::Op::kTemplate) out->push_back(c.path_template);
    if (c.op == Condition::Op::kAll) TopTemplates(c.children, out);
  }
}

bool ReadsBody(const std::vector<Condition>& conditions) {
  for (const Condition& c : conditions) {
    if (c.source.kind == Source::Kind::kBody || ReadsBody(c.children)) return true;
  }
  return false;
}

}  // namespace

std::optional<Condition> ParseTemplateCondition(const nlohmann::json& v, const Source& source,
                                                const std::string& path, base::ConfigErrors& e) {
  if (source.kind != Source::Kind::kPath) {
    e.Add(path, "a template matches the path: write it under \"path\"");
    return std::nullopt;
  }
  if (!v.is_string()) {
    e.Add(path, "must be a string such as \"/users/{id}/orders\" (got " + JsonTypeName(v) + ")");
    return std::nullopt;
  }
  auto t = std::make_shared<PathTemplate>();
  std::string why;
  if (!ParsePathTemplate(v.get<std::string>(), t.get(), &why)) {
    e.Add(path, why);
    return std::nullopt;
  }
  Condition c;
  c.source = source;
  c.op = Condition::Op::kTemplate;
  c.text = source.spec + " template " + t->text;
  c.path_template = std::move(t);
  return c;
}

void LinkPathParams(const std::string& rule_path, Rule* rule, base::ConfigErrors& e) {
  std::vector<std::shared_ptr<const PathTemplate>> templates;
  TopTemplates(rule->match, &templates);
  auto link = [&](Source& s, const std::string& where) {
    if (s.kind != Source::Kind::kPathParam) return;
    if (templates.size() != 1) {
      e.Add(where, s.spec + " needs exactly one \"path\": {\"template\": \"/.../{" + s.arg +
                       "}/...\"} at the top of the rule's match (found " +
                       std::to_string(templates.size()) + ")");
      return;
    }
    const int index = templates.front()->Find(s.arg);
    if (index < 0) {
      e.Add(where,
            "the rule's path template " + templates.front()->text + " has no {" + s.arg + "}");
      return;
    }
    s.path_template = templates.front();
    s.path_param = index;
  };
  for (size_t i = 0; i < rule->keys.size(); ++i) {
    link(rule->keys[i], base::IndexPath(base::FieldPath(rule_path, "limit_keys"), i));
  }
  const std::string match_path = base::FieldPath(rule_path, "match");
  ForEachConditionSource(rule->match, [&](Source& s) { link(s, match_path); });
}

bool RuleReadsBody(const Rule& rule) {
  for (const Source& s : rule.keys) {
    if (s.kind == Source::Kind::kBody) return true;
  }
  return ReadsBody(rule.match);
}

}  // namespace tollgate
