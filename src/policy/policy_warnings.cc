// PolicyWarnings (tollgate/policy.h): rules a policy holds that can never apply.
#include <map>
#include <optional>
#include <string>

#include "policy/policy_impl.h"

namespace tollgate {
namespace {

std::string RulePath(size_t i) { return "rules[" + std::to_string(i) + "]"; }

std::string Named(const Policy& policy, size_t i) {
  return RulePath(i) + " (\"" + policy.rules[i].name + "\")";
}

// What makes two rules one tier group, in words.
std::string GroupWords(const Rule& rule) {
  if (rule.group.rfind("group:", 0) == 0) {
    return "the same \"group\" (\"" + rule.group.substr(6) + "\")";
  }
  return "the same limit_keys";
}

}  // namespace

std::vector<ConfigError> PolicyWarnings(const Policy& policy) {
  std::vector<ConfigError> out;
  std::map<int, size_t> catch_all;  // tier group -> its first rule without match
  std::optional<size_t> stops;      // the first allow / enforced deny rule without match
  for (size_t i = 0; i < policy.rules.size(); ++i) {
    const Rule& rule = policy.rules[i];
    if (stops) {
      const bool allow = policy.rules[*stops].action == RuleAction::kAllow;
      out.push_back({RulePath(i), "never applies: " + Named(policy, *stops) +
                                      (allow ? " allows" : " denies") +
                                      " every request and evaluation stops there"});
      continue;
    }
    const int group = policy.group_of[i];
    if (auto first = catch_all.find(group); first != catch_all.end()) {
      out.push_back({RulePath(i), "never applies: " + Named(policy, first->second) + " has " +
                                      GroupWords(rule) +
                                      " and no match, so it takes every request of their tier "
                                      "group first; give \"" +
                                      rule.name +
                                      "\" a \"group\" of its own to stack both, or the first a "
                                      "\"match\" to make them tiers"});
      continue;
    }
    if (!rule.match.empty()) continue;
    catch_all.emplace(group, i);
    const bool enforced_deny =
        rule.action == RuleAction::kDeny && !rule.shadow && rule.enforce_percent >= 100;
    if (rule.action == RuleAction::kAllow || enforced_deny) stops = i;
  }
  return out;
}

}  // namespace tollgate
