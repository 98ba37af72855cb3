#include "rls/rls_config.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <utility>

#include "base/ascii.h"
#include "base/config_errors.h"
#include "rls/rls_counters.h"

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
    // Exact values, including wildcard ones ("pre*") under their literal text.
    std::unordered_map<std::string, std::unique_ptr<Node>, StringHash, std::equal_to<>> values;
    std::vector<std::pair<std::string, const Node*>> wildcards;  // prefix, in config order
    std::unique_ptr<Node> any;                                   // key only
  };
  std::unique_ptr<RlsRule> rule;
  std::unordered_map<std::string, KeyLevel, StringHash, std::equal_to<>> keys;

  const Node* Next(const RlsEntry& e) const {
    auto k = keys.find(e.key);
    if (k == keys.end()) return nullptr;
    const KeyLevel& level = k->second;
    if (auto v = level.values.find(e.value); v != level.values.end()) return v->second.get();
    for (const auto& [prefix, node] : level.wildcards) {
      if (e.value.starts_with(prefix)) return node;
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
  const std::string lower = base::AsciiLowered(name);
  for (size_t i = 1; i < std::size(kUnitNames); ++i) {
    if (lower == kUnitNames[i]) {
      *out = static_cast<RlsUnit>(i);
      return true;
    }
  }
  return false;
}

Result<Limit> LimitForUnit(RlsUnit unit, uint32_t requests_per_unit, Algorithm algorithm,
                           int64_t burst) {
  const int64_t seconds = UnitSeconds(unit);
  if (seconds == 0) return InvalidArgument("unit: unknown");
  LimitSpec spec;
  spec.algorithm = algorithm;
  switch (algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket:
      spec.rate = static_cast<double>(requests_per_unit) / static_cast<double>(seconds);
      spec.burst = burst > 0 ? burst : static_cast<int64_t>(requests_per_unit);
      break;
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindow:
    case Algorithm::kSlidingLog:
      spec.burst = requests_per_unit;
      spec.window = std::chrono::seconds(seconds);
      break;
  }
  return Limit::Create(spec);
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
  auto d = domains_.find(domain);
  if (d == domains_.end()) return nullptr;
  const Node* node = d->second.get();
  const RlsRule* rule = nullptr;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Node* next = node->Next(entries[i]);
    if (next == nullptr) break;
    // Like envoyproxy/ratelimit: a rule applies only to a descriptor whose
    // entries all matched, down to the rule's own level.
    if (next->rule && i + 1 == entries.size()) rule = next->rule.get();
    if (next->keys.empty()) break;
    node = next;
  }
  return rule;
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
    rule->replaces = rl.replaces;
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
    const Algorithm algorithm = rl.algorithm.value_or(options.default_algorithm);
    const bool bucket =
        algorithm == Algorithm::kTokenBucket || algorithm == Algorithm::kLeakyBucket;
    const auto& supported = options.supported_algorithms;
    if (!rl.unlimited && !supported.empty() &&
        std::find(supported.begin(), supported.end(), algorithm) == supported.end()) {
      Error(d.source, p + ".algorithm",
            std::string(AlgorithmName(algorithm)) + " is not supported by " + options.store_name +
                (rl.algorithm ? "" : " (it is the default algorithm: set rate_limit.algorithm)"));
    }
    if (rl.burst < 0 || (rl.burst > 0 && !bucket)) {
      Error(d.source, p + ".burst",
            rl.burst < 0 ? "must be >= 1"
                         : "applies to token_bucket and leaky_bucket only (window algorithms "
                           "allow requests_per_unit per unit)");
    }
    if (errors->size() == before && !rl.unlimited && rl.requests_per_unit > 0) {
      for (const LimitError& e : Limit::Validate([&] {
             LimitSpec s;
             s.algorithm = algorithm;
             const int64_t secs = UnitSeconds(rl.unit);
             if (bucket) {
               s.rate = static_cast<double>(rl.requests_per_unit) / static_cast<double>(secs);
               s.burst = rl.burst > 0 ? rl.burst : rl.requests_per_unit;
             } else {
               s.burst = rl.requests_per_unit;
               s.window = std::chrono::seconds(secs);
             }
             return s;
           }())) {
        std::string field = ".requests_per_unit";
        if (e.field == "burst" && rl.burst > 0) field = ".burst";
        if (e.field == "window") field = ".unit";
        std::string hint;
        if (e.field == "rate") {
          hint = " (" + std::to_string(rl.requests_per_unit) + " per " +
                 std::string(UnitName(rl.unit)) +
                 " is slower than the core's minimum rate of one per 11.6 days: use "
                 "algorithm: fixed_window)";
        } else if (e.field == "burst" && !bucket) {
          hint = " (use algorithm: token_bucket for larger quotas)";
        }
        Error(d.source, p + field,
              std::string(AlgorithmName(algorithm)) + " " + e.field + ": " + e.message + hint);
      }
      if (errors->size() == before) {
        auto limit = LimitForUnit(rl.unit, rl.requests_per_unit, algorithm, rl.burst);
        if (limit.ok()) {
          rule->shape = LimitShape(*limit);
          rule->limit = *limit;
        } else {
          Error(d.source, p, limit.status().message());
        }
      }
    }
    rule->counters = counters->ForRule(full_key);
    ++rules;
    return rule;
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
      if (spec.rate_limit) node->rule = CompileRule(d, spec, path, full_key);
      Load(d, spec.descriptors, node.get(), path, full_key + ".", depth + 1);
      if (!spec.value.empty() && spec.value.back() == '*') {
        level.wildcards.emplace_back(spec.value.substr(0, spec.value.size() - 1), node.get());
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
