// DiffPolicies: rule-by-rule changes between two policies, on RuleSummary.
#include <algorithm>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tollgate/policy.h"

namespace tollgate {
namespace {

// Everything about a rule but its limit's numbers: keys, match, mode, group,
// enforce percentage, failure mode and algorithm. Two rules with equal shapes
// differ only in how much they admit.
std::string Shape(const RuleSummary& r) {
  const std::string limit = r.limit.ToString();
  std::string rest = r.description.substr(std::min(limit.size(), r.description.size()));
  return std::string(AlgorithmName(r.limit.algorithm())) + "|" + rest + "|" + r.group + "|" +
         std::to_string(r.enforce_percent) + "|" + r.failure_mode;
}

// Compares how much two limits of one algorithm admit: +1 raised, -1 lowered,
// 0 equal, 2 mixed (more in one respect, less in another).
int CompareLimits(const Limit& a, const Limit& b) {
  bool more = false, less = false;
  auto weigh = [&](int64_t before, int64_t after) {
    more |= after > before;
    less |= after < before;
  };
  weigh(b.interval_ns(), a.interval_ns());  // a shorter interval is a higher rate
  weigh(a.burst(), b.burst());
  weigh(a.max_delay_ns(), b.max_delay_ns());
  if (more && less) return 2;
  return more ? 1 : less ? -1 : 0;
}

}  // namespace

std::string_view RuleChangeKindName(RuleChange::Kind kind) {
  switch (kind) {
    case RuleChange::Kind::kAdded:
      return "added";
    case RuleChange::Kind::kRemoved:
      return "removed";
    case RuleChange::Kind::kRaised:
      return "raised";
    case RuleChange::Kind::kLowered:
      return "lowered";
    case RuleChange::Kind::kChanged:
      return "changed";
  }
  return "changed";
}

std::vector<RuleChange> DiffPolicies(const Policy& before, const Policy& after) {
  const std::vector<RuleSummary> old_rules = SummarizePolicy(before);
  const std::vector<RuleSummary> new_rules = SummarizePolicy(after);
  std::unordered_map<std::string, const RuleSummary*> old_by_name, new_by_name;
  for (const RuleSummary& r : old_rules) old_by_name.emplace(r.name, &r);
  for (const RuleSummary& r : new_rules) new_by_name.emplace(r.name, &r);
  std::vector<RuleChange> changes;
  for (const RuleSummary& n : new_rules) {
    auto it = old_by_name.find(n.name);
    if (it == old_by_name.end()) {
      changes.push_back({RuleChange::Kind::kAdded, n.name, "", n.description});
      continue;
    }
    const RuleSummary& o = *it->second;
    const bool same_shape = Shape(o) == Shape(n);
    const int cmp = same_shape ? CompareLimits(o.limit, n.limit) : 2;
    if (same_shape && cmp == 0 && o.description == n.description) continue;
    RuleChange::Kind kind = cmp == 1    ? RuleChange::Kind::kRaised
                            : cmp == -1 ? RuleChange::Kind::kLowered
                                        : RuleChange::Kind::kChanged;
    changes.push_back({kind, n.name, o.description, n.description});
  }
  for (const RuleSummary& o : old_rules) {
    if (!new_by_name.contains(o.name)) {
      changes.push_back({RuleChange::Kind::kRemoved, o.name, o.description, ""});
    }
  }
  return changes;
}

std::string FormatPolicyDiff(std::span<const RuleChange> changes) {
  if (changes.empty()) return "no changes\n";
  std::string out;
  for (const RuleChange& c : changes) {
    std::string kind(RuleChangeKindName(c.kind));
    kind.resize(8, ' ');
    out += kind + c.rule + ": ";
    if (c.kind == RuleChange::Kind::kAdded) {
      out += c.after;
    } else if (c.kind == RuleChange::Kind::kRemoved) {
      out += c.before;
    } else {
      out += c.before + " -> " + c.after;
    }
    out += '\n';
  }
  return out;
}

std::string PolicyDiffJson(std::span<const RuleChange> changes) {
  nlohmann::json out = nlohmann::json::array();
  for (const RuleChange& c : changes) {
    out.push_back({{"change", RuleChangeKindName(c.kind)},
                   {"rule", c.rule},
                   {"before", c.before},
                   {"after", c.after}});
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tollgate
