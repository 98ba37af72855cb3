// The public face of the Envoy engine (tollgate/envoy_rls.h): the decider's
// metrics and standalone reload, and the factories a front end calls.
#include <string>
#include <utility>
#include <vector>

#include "rls/rls_counters.h"
#include "rls/rls_decider.h"
#include "rls/rls_yaml.h"
#include "tollgate/envoy_rls.h"

namespace tollgate::rls {

std::vector<ConfigError> RlsDecider::LoadFiles(const std::vector<std::string>& paths,
                                               const RlsCompileOptions& options) {
  ParsedRlsConfig parsed = LoadRlsConfigFiles(paths, options, config()->shared_counters());
  if (parsed.config) SetConfig(parsed.config);
  return parsed.errors;
}

void RlsDecider::AppendMetrics(std::string* out) const { counters().AppendPrometheus(out); }

std::vector<RuleCounters> RlsDecider::DecisionCounters() const {
  std::vector<RuleCounters> out;
  for (const RuleCountersSnapshot& r : counters().RuleSnapshot()) {
    RuleCounters c;
    c.rule = r.rule;
#define TOLLGATE_COPY_DECISION(field, label) c.field = r.field;
    TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_COPY_DECISION)
#undef TOLLGATE_COPY_DECISION
    out.push_back(std::move(c));
  }
  return out;
}

LatencyCounts RlsDecider::DecisionLatency() const { return counters().Latency(); }

RlsCompileOptions RlsCompileOptionsFor(StoreScheme scheme, Algorithm default_algorithm) {
  RlsCompileOptions o;
  o.default_algorithm = default_algorithm;
  if (scheme == StoreScheme::kLocal) return o;
  o.store_name =
      scheme == StoreScheme::kRedisCluster ? "the redis-cluster store" : "the redis store";
  o.supported_algorithms = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket,
                            Algorithm::kFixedWindow, Algorithm::kSlidingWindow};
  return o;
}

Result<std::unique_ptr<EnvoyDecider>> AttachEnvoyDecider(Runtime& runtime,
                                                         std::vector<std::string> paths,
                                                         const RlsCompileOptions& compile,
                                                         const Clock* clock,
                                                         RlsDecideOptions decide) {
  // The one Enforcer, HTTP's: this front end brings only its response options
  // and its rules' counters.
  Enforcer& enforcer = runtime.enforcer();
  Result<Enforcer::FrontEnd*> front_end = enforcer.AddFrontEnd(EnvoyResponseOptions(decide));
  if (!front_end.ok()) return InvalidArgument("grpc: " + front_end.status().message());
  // The rule files become the Runtime's companion: compiled now, then
  // reloaded (and checked by a PUT) with the policy, in its one swap.
  std::vector<ConfigError> errors = runtime.AttachCompanion(
      RlsCompanion(runtime.policies(), enforcer, *front_end, std::move(paths), compile));
  if (!errors.empty()) {
    std::string text = "invalid rls_config:";
    for (const auto& e : errors) text += "\n  " + e.ToString();
    return InvalidArgument(text);
  }
  return std::unique_ptr<EnvoyDecider>(
      new RlsDecider(&runtime.policies(), &enforcer, *front_end, clock, std::move(decide)));
}

Result<std::unique_ptr<EnvoyDecider>> MakeEnvoyDecider(Enforcer* enforcer,
                                                       std::shared_ptr<const RlsConfig> config,
                                                       const Clock* clock,
                                                       RlsDecideOptions options) {
  auto made = RlsDecider::Standalone(enforcer, std::move(config), clock, std::move(options));
  if (!made.ok()) return made.status();
  return std::unique_ptr<EnvoyDecider>(std::move(made).value());
}

}  // namespace tollgate::rls
