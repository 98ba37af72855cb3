#include "rls/rls_config.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <utility>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "base/config_errors.h"
#include "rls/rls_counters.h"
#include "rls/rls_wildcard.h"
#include "tollgate/http_text.h"

namespace tollgate::rls {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

constexpr std::string_view kUnitNames[] = {"unknown", "second", "minute", "hour",
                                           "day",     "month",  "year",   "week"};

}  // namespace

struct RlsConfig::Node {
  struct KeyLevel {
    // Exact values, including wildcard ones ("a*b") under their literal text.
    std::unordered_map<std::string, std::unique_ptr<Node>, StringHash, std::equal_to<>> values;
    std::vector<std::pair<std::string, const Node*>> wildcards;  // pattern, in config order
    std::unique_ptr<Node> any;                                   // key only
  };
  std::unique_ptr<RlsRule> rule;
  std::unordered_map<std::string, KeyLevel, StringHash, std::equal_to<>> keys;
  // A share_threshold wildcard's pattern: the value every match counts under.
  std::string shared_value;

  const Node* Next(const RlsEntry& e) const {
    auto k = keys.find(e.key);
    if (k == keys.end()) return nullptr;
    const KeyLevel& level = k->second;
    if (auto v = level.values.find(e.value); v != level.values.end()) return v->second.get();
    for (const auto& [pattern, node] : level.wildcards) {
      if (WildcardMatch(pattern, e.value)) return node;
    }
    return level.any.get();
  }
};

int64_t UnitSeconds(RlsUnit unit) {
  switch (unit) {
    case RlsUnit::kSecond:
      return 1;
    case RlsUnit::kMinute:
      return 60;
    case RlsUnit::kHour:
      return 3600;
    case RlsUnit::kDay:
      return 86400;
    case RlsUnit::kWeek:
      return 7 * 86400;
    case RlsUnit::kMonth:
      return 30 * 86400;
    case RlsUnit::kYear:
      return 365 * 86400;
    case RlsUnit::kUnknown:
      break;
  }
  return 0;
}

std::string_view UnitName(RlsUnit unit) {
  const auto i = static_cast<size_t>(unit);
  return i < std::size(kUnitNames) ? kUnitNames[i] : "unknown";
}

bool ParseUnit(std::string_view name, RlsUnit* out) {
  const std::string lower = AsciiLowered(name);
  for (size_t i = 1; i < std::size(kUnitNames); ++i) {
    if (lower == kUnitNames[i]) {
      *out = static_cast<RlsUnit>(i);
      return true;
    }
  }
  return false;
}

LimitSpec SpecForUnit(RlsUnit unit, uint32_t requests_per_unit, Algorithm algorithm,
                      int64_t burst) {
  const Nanos period = std::chrono::seconds(UnitSeconds(unit));
  LimitSpec spec;
  spec.algorithm = algorithm;
  switch (algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      spec.count = requests_per_unit;
      spec.period = period;
      spec.burst = burst > 0 ? burst : static_cast<int64_t>(requests_per_unit);
      break;
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindow:
    case Algorithm::kSlidingLog:
      spec.burst = requests_per_unit;
      spec.window = period;
      break;
  }
  return spec;
}

Result<Limit> LimitForUnit(RlsUnit unit, uint32_t requests_per_unit, Algorithm algorithm,
                           int64_t burst) {
  if (UnitSeconds(unit) == 0) return InvalidArgument("unit: unknown");
  return Limit::Create(SpecForUnit(unit, requests_per_unit, algorithm, burst));
}

std::string LimitShape(const Limit& limit) {
  const std::string w = std::to_string(limit.window_ns() / 1'000'000'000);
  switch (limit.algorithm()) {
    case Algorithm::kTokenBucket:
      return "tb";
    case Algorithm::kLeakyBucket:
      return "lb";
    case Algorithm::kFixedWindow:
      return "fw" + w;
    case Algorithm::kSlidingWindow:
      return "sw" + w;
    case Algorithm::kSlidingLog:
      return "sl" + w;
  }
  return "x";
}

RlsConfig::RlsConfig() = default;
RlsConfig::~RlsConfig() = default;

bool RlsConfig::HasDomain(std::string_view domain) const {
  return domains_.find(domain) != domains_.end();
}

const RlsRule* RlsConfig::Match(std::string_view domain,
                                const std::vector<RlsEntry>& entries) const {
  return MatchForKey(domain, entries).rule;
}

RlsMatch RlsConfig::MatchForKey(std::string_view domain,
                                const std::vector<RlsEntry>& entries) const {
  RlsMatch match;
  auto d = domains_.find(domain);
  if (d == domains_.end()) return match;
  const Node* node = d->second.get();
  for (size_t i = 0; i < entries.size(); ++i) {
    const Node* next = node->Next(entries[i]);
    if (next == nullptr) break;
    const bool shared = !next->shared_value.empty();
    match.key_entries.push_back({entries[i].key, shared ? next->shared_value : entries[i].value});
    match.shared |= shared;
    // Like envoyproxy/ratelimit: a rule applies only to a descriptor whose
    // entries all matched, down to the rule's own level.
    if (next->rule && i + 1 == entries.size()) match.rule = next->rule.get();
    if (next->keys.empty()) break;
    node = next;
  }
  if (match.rule == nullptr) match = RlsMatch{};
  return match;
}

namespace {

void DumpNode(const RlsConfig::Node& node, std::vector<std::string>* lines);

}  // namespace

std::string RlsConfig::Dump() const {
  std::vector<std::string> lines;
  for (const auto& [_, node] : domains_) DumpNode(*node, &lines);
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

namespace {

void VisitRules(const RlsConfig::Node& node, const std::function<void(const RlsRule&)>& fn) {
  if (node.rule) fn(*node.rule);
  for (const auto& [_, level] : node.keys) {
    for (const auto& [__, child] : level.values) VisitRules(*child, fn);
    if (level.any) VisitRules(*level.any, fn);
  }
}

}  // namespace

void RlsConfig::ForEachRule(const std::function<void(const RlsRule&)>& fn) const {
  for (const auto& [_, node] : domains_) VisitRules(*node, fn);
}

namespace {

void DumpNode(const RlsConfig::Node& node, std::vector<std::string>* lines) {
  if (node.rule) {
    const RlsRule& r = *node.rule;
    std::string line = r.full_key + ": ";
    if (r.unlimited) {
      line += "unlimited";
    } else {
      line += std::to_string(r.requests_per_unit) + "/" + std::string(UnitName(r.unit));
      line += r.limit ? " " + r.limit->ToString() : " deny-all";
    }
    if (!r.name.empty()) line += " name=" + r.name;
    if (r.shadow_mode) line += " shadow_mode";
    if (r.quota_mode) line += " quota_mode";
    if (r.charge_only) line += " charge_only";
    lines->push_back(std::move(line));
  }
  for (const auto& [_, level] : node.keys) {
    for (const auto& [__, child] : level.values) DumpNode(*child, lines);
    if (level.any) DumpNode(*level.any, lines);
  }
}

}  // namespace

struct RlsConfigBuilder {
  const RlsCompileOptions& options;
  std::shared_ptr<RlsCounters> counters;
  std::vector<ConfigError>* errors;
  size_t rules = 0;

  void Error(const std::string& source, const std::string& path, std::string message) {
    base::ConfigErrors(errors, source).Add(path, message);
  }

  // The descriptor's `metadata` (JSON text from the importer) as a Struct.
  std::shared_ptr<const google::protobuf::Struct> CompileMetadata(const RlsDomainSpec& d,
                                                                  const RlsDescriptorSpec& spec,
                                                                  const std::string& path) {
    if (spec.metadata_json.empty()) return nullptr;
    auto metadata = std::make_shared<google::protobuf::Struct>();
    const auto status = google::protobuf::util::JsonStringToMessage(spec.metadata_json, &*metadata);
    if (!status.ok()) {
      Error(d.source, path + ".metadata",
            "must be a mapping of names to values: " + std::string(status.message()));
      return nullptr;
    }
    return metadata;
  }

  std::unique_ptr<RlsRule> CompileRule(const RlsDomainSpec& d, const RlsDescriptorSpec& spec,
                                       const std::string& path, const std::string& full_key) {
    const RlsRateLimitSpec& rl = *spec.rate_limit;
    const std::string p = path + ".rate_limit";
    const size_t before = errors->size();
    auto rule = std::make_unique<RlsRule>();
    rule->full_key = full_key;
    rule->name = rl.name;
    rule->unit = rl.unit;
    rule->requests_per_unit = rl.requests_per_unit;
    rule->unlimited = rl.unlimited;
    rule->shadow_mode = spec.shadow_mode;
    rule->quota_mode = spec.quota_mode;
    rule->charge_only = spec.charge_only;
    rule->replaces = rl.replaces;
    rule->metadata = CompileMetadata(d, spec, path);
    CheckUnitAndReplaces(d, rl, p);
    if (spec.charge_only && (rl.unlimited || rl.requests_per_unit == 0)) {
      Error(d.source, path + ".charge_only",
            "needs a limit to charge (requests_per_unit > 0, not unlimited)");
    }
    if (spec.charge_only && spec.quota_mode) {
      Error(d.source, path + ".charge_only", "cannot be combined with quota_mode");
    }
    const Algorithm algorithm = rl.algorithm.value_or(options.default_algorithm);
    CheckAlgorithm(d, rl, p, algorithm);
    if (errors->size() == before && !rl.unlimited && rl.requests_per_unit > 0) {
      CompileLimit(d, rl, p, algorithm, *rule);
    }
    rule->counters = counters->ForRule(full_key);
    rule->index = rules++;
    return rule;
  }

  // unit is required unless unlimited (then it must be absent); replaces names others.
  void CheckUnitAndReplaces(const RlsDomainSpec& d, const RlsRateLimitSpec& rl,
                            const std::string& p) {
    if (rl.unlimited && rl.unit != RlsUnit::kUnknown) {
      Error(d.source, p + ".unit", "should not specify rate limit unit when unlimited");
    } else if (!rl.unlimited && rl.unit == RlsUnit::kUnknown) {
      Error(d.source, p + ".unit", "required: one of second, minute, hour, day, week, month, year");
    }
    for (size_t i = 0; i < rl.replaces.size(); ++i) {
      const std::string rp = p + ".replaces[" + std::to_string(i) + "].name";
      if (rl.replaces[i].empty()) {
        Error(d.source, rp, "should not have an empty replaces entry");
      } else if (rl.replaces[i] == rl.name) {
        Error(d.source, rp, "replaces should not contain name of same descriptor");
      }
    }
  }

  static bool IsBucket(Algorithm a) { return !IsWindowAlgorithm(a); }

  // The store runs the algorithm; burst only with a bucket algorithm.
  void CheckAlgorithm(const RlsDomainSpec& d, const RlsRateLimitSpec& rl, const std::string& p,
                      Algorithm algorithm) {
    const auto& supported = options.supported_algorithms;
    if (!rl.unlimited && !supported.empty() &&
        std::find(supported.begin(), supported.end(), algorithm) == supported.end()) {
      Error(d.source, p + ".algorithm",
            std::string(AlgorithmName(algorithm)) + " is not supported by " + options.store_name +
                (rl.algorithm ? "" : " (it is the default algorithm: set rate_limit.algorithm)"));
    }
    if (rl.burst < 0 || (rl.burst > 0 && !IsBucket(algorithm))) {
      Error(d.source, p + ".burst",
            rl.burst < 0 ? "must be >= 1"
                         : "applies to token_bucket and leaky_bucket only (window algorithms "
                           "allow requests_per_unit per unit)");
    }
  }

  // The core's checks of the limit, reported under the YAML's field names, then the limit.
  void CompileLimit(const RlsDomainSpec& d, const RlsRateLimitSpec& rl, const std::string& p,
                    Algorithm algorithm, RlsRule& rule) {
    const size_t before = errors->size();
    for (const LimitError& e :
         Limit::Validate(SpecForUnit(rl.unit, rl.requests_per_unit, algorithm, rl.burst))) {
      std::string field = ".requests_per_unit";
      if (e.field == "burst" && rl.burst > 0) field = ".burst";
      if (e.field == "window" || e.field == "period") field = ".unit";
      std::string hint;
      if (e.field == "burst" && !IsBucket(algorithm))
        hint = " (use algorithm: token_bucket for larger quotas)";
      Error(d.source, p + field,
            std::string(AlgorithmName(algorithm)) + " " + e.field + ": " + e.message + hint);
    }
    if (errors->size() != before) return;
    auto limit = LimitForUnit(rl.unit, rl.requests_per_unit, algorithm, rl.burst);
    if (limit.ok()) {
      rule.shape = LimitShape(*limit);
      rule.limit = *limit;
    } else {
      Error(d.source, p, limit.status().message());
    }
  }

  void Load(const RlsDomainSpec& d, const std::vector<RlsDescriptorSpec>& specs,
            RlsConfig::Node* parent, const std::string& path_prefix, const std::string& key_prefix,
            size_t depth) {
    if (depth > options.max_depth) {
      Error(d.source, path_prefix.empty() ? "descriptors" : path_prefix + ".descriptors",
            "nested deeper than " + std::to_string(options.max_depth) + " levels");
      return;
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      const RlsDescriptorSpec& spec = specs[i];
      const std::string path =
          (path_prefix.empty() ? "" : path_prefix + ".") + "descriptors[" + std::to_string(i) + "]";
      if (spec.key.empty()) {
        Error(d.source, path + ".key", "descriptor has empty key");
        continue;
      }
      const std::string final_key = spec.value.empty() ? spec.key : spec.key + "_" + spec.value;
      const std::string full_key = key_prefix + final_key;
      RlsConfig::Node::KeyLevel& level = parent->keys[spec.key];
      std::unique_ptr<RlsConfig::Node>* slot =
          spec.value.empty() ? &level.any : &level.values[spec.value];
      if (*slot) {
        Error(d.source, path, "duplicate descriptor composite key '" + full_key + "'");
        continue;
      }
      auto node = std::make_unique<RlsConfig::Node>();
      if (spec.rate_limit) {
        node->rule = CompileRule(d, spec, path, full_key);
      } else if (spec.charge_only) {
        Error(d.source, path + ".charge_only", "needs a rate_limit on the same descriptor");
      }
      Load(d, spec.descriptors, node.get(), path, full_key + ".", depth + 1);
      if (IsWildcard(spec.value)) {
        level.wildcards.emplace_back(spec.value, node.get());
        if (spec.share_threshold) node->shared_value = spec.value;
      }
      *slot = std::move(node);
    }
  }
};

ParsedRlsConfig CompileRlsConfig(const std::vector<RlsDomainSpec>& domains,
                                 const RlsCompileOptions& options,
                                 std::shared_ptr<RlsCounters> counters) {
  ParsedRlsConfig out;
  if (!counters) counters = std::make_shared<RlsCounters>();
  std::shared_ptr<RlsConfig> config(new RlsConfig());
  config->counters_ = counters;
  RlsConfigBuilder b{options, counters, &out.errors};
  for (const RlsDomainSpec& d : domains) {
    if (d.domain.empty()) {
      b.Error(d.source, "domain", "config file cannot have empty domain");
      continue;
    }
    auto& root = config->domains_[d.domain];
    if (root && !options.merge_domains) {
      b.Error(d.source, "domain", "duplicate domain '" + d.domain + "' in config file");
      continue;
    }
    if (!root) root = std::make_unique<RlsConfig::Node>();
    b.Load(d, d.descriptors, root.get(), "", d.domain + ".", 0);
  }
  if (!out.errors.empty()) return out;
  config->rule_count_ = b.rules;
  out.config = std::move(config);
  return out;
}

}  // namespace tollgate::rls
